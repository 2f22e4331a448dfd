"""The instance supervisor: it owns one instance's part in a job.

Its root keeps the loop (`supervisor`) and what the loop hands work to: restore, the command's start,
uploads, endings, a job that cannot run (`fatal`), and the node's mode chosen once at start (`one_node`,
or `several_nodes` with `several_uploads` and `several_endings`). Its wings, each importing only those
below it: `instance` (IMDS, AWS clients, its own group, the agent's settings), `records` (status.json,
telemetry, CloudWatch, notifications, the instance's record for the job's cost), `watches` (notice,
hang, saves, budget, deadline, lease), `program` (the training command as a process) and `round` (a
node's part in a world of several). No wing imports the root.

It may import `trainer.storage` (checkpoints live there), `trainer.capacity` (the deadline policy),
`trainer.costs` (prices) and, of `trainer.distributed`, only the torch-free round record (`rounds`); never
`trainer.builtin` or torch: it runs any training command as a child process, the built-in one too.
"""
