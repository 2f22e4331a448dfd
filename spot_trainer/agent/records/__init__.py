"""What the agent tells the user and the job's records: status.json (`status`), events, metrics and logs
(`telemetry`, `cloudwatch`, `log_lines`), notifications (`notify`), the instance's record for the job's cost
(`instance_record`), boot times and events, failed starts, and the training pace the status and the deadline
read (`pace`).

It may import the agent's `instance` wing, `spot_trainer.storage`, `spot_trainer.costs` and the shelf.
"""
