"""The instance supervisor: it owns one instance's part in a job.

Its root keeps the loop (`supervisor`), the command line (`cli`) and a job that cannot run (`fatal`,
`failed_record`). Its wings, each importing only those below it: `instance` (IMDS, AWS clients, its own
group, the agent's settings), `records` (status.json, telemetry, CloudWatch, notifications, the
instance's record for the job's cost), `watches` (notice, hang, saves, budget, deadline), `program` (the
training command as a process), `node` (what a node does whichever its mode: restore, the command's
start, uploads, endings, the outcome of a run, the modes' protocol), and the two modes on top, each a
folder that builds itself and never imports the other: `one_node` (a node alone, under the job's lease)
and `several_nodes` (torchrun elastic: the world, rounds, sharded saves, the region fence). The
supervisor takes of a mode only its `build`. No wing imports the root.

It may import `spot_trainer.storage` (checkpoints live there), `spot_trainer.capacity` (the deadline policy),
`spot_trainer.costs` (prices) and, of `spot_trainer.distributed`, only the torch-free round record (`rounds`); never
`spot_trainer.builtin` or torch: it runs any training command as a child process, the built-in one too.
"""
