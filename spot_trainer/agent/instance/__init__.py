"""This instance and what it is told: its metadata (IMDSv2, `imds`), the AWS clients it meets at Protocols,
its own Auto Scaling group (`own_group`), and the agent's settings read from the environment file (`config`,
`env_file`, `setting_names`).

The agent's ground floor: it may import `spot_trainer.storage` and the shelf, and nothing else of the agent.
"""
