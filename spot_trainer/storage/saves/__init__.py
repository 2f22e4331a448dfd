"""What a program's saves are: which entries of CHECKPOINT_DIR are checkpoints, of which step and whole or
not (`layouts`), one entry per framework (`frameworks`), series of names, library folders, Lightning's step,
DCP's shards and what a node's ranks read of them at any world size (`resharded`, `chunk_archive`), the rule
that sends each up (`upload_rules`), and the outputs a finished command leaves.

It may import the `files` and `s3` wings, storage's vocabulary and, of `spot_trainer.integrations`, only
`checkpoint_names` and `byte_ranges` (which import nothing).
"""
