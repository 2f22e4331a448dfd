"""What a program's saves are: which entries of CHECKPOINT_DIR are checkpoints, of which step and whole or
not (`layouts`), one entry per framework (`frameworks`), series of names, library folders, Lightning's step,
DCP's shards, the rule that sends each up (`upload_rules`), and the outputs a finished command leaves.

It may import the `files` and `s3` wings, storage's vocabulary and, of `trainer.integrations`, only
`checkpoint_names`.
"""
