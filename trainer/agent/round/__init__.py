"""A node's part in a world of several: the round torchrun formed (`world`), this node's part in it and
how a round's failures are read, the torchrun command line, and this node's part of each sharded save.

It may import the `instance`, `records`, `watches` and `program` wings, `trainer.storage`, the rendezvous's
round record (`trainer.distributed.rounds`, torch-free) and the shelf. The strategies that use it
(`several_nodes`, `several_uploads`, `several_endings`) live in the agent's root beside `one_node`.
"""
