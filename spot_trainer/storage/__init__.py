"""Checkpoint storage: where a checkpoint lives and how it moves.

Its root holds only the vocabulary every wing speaks (`record_kinds`, `failure_causes`, `upload_outcome`).
Its wings, each importing only those below it: `files` (the checkpoint folder's files, the `step-N`
contract and the local store, the one module that imports torch, for its serializer), `s3` (the job's
objects, conditional writes, the lease), `saves` (what a program's saves are: layouts, one entry per
framework in `frameworks`, DCP's shards) and `steps` (a step's way to S3 and back: the store, the
uploader, a sharded step's parts, the restore). It imports nothing from `spot_trainer.agent` or
`spot_trainer.builtin`, and of `spot_trainer.integrations` only what both sides agree on
and imports nothing: the names of a framework's saves (`checkpoint_names`) and byte ranges (`byte_ranges`).
"""
