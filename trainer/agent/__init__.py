"""The instance supervisor: it owns one instance's part in a job.

Lifecycle (lease, restore, run, upload, stop), the training command's process, lease renewal, the
instance's own Auto Scaling group, status.json and telemetry, CloudWatch, the IMDS client and the
agent's configuration. It may import `trainer.storage` (checkpoints live there) and never
`trainer.builtin` or torch: it runs any training command as a child process, the built-in one too.
"""
