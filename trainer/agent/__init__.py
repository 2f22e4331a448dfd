"""The instance supervisor: it owns one instance's part in a job.

Lifecycle (lease, restore, run, upload, stop), the training command's process, lease renewal, the
instance's own Auto Scaling group, status.json and telemetry, CloudWatch, notifications, the
instance's record for the job's cost, the deadline kept from the training node, a node's part in a
world of several (`world`), the IMDS client and the agent's configuration. It may import
`trainer.storage` (checkpoints live there), `trainer.capacity` (the deadline policy) and
`trainer.costs` (prices), and never `trainer.builtin`, `trainer.distributed` or torch: it runs any
training command as a child process, the built-in one too.
"""
