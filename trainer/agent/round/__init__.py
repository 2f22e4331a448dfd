"""A node's part in a world of several: the round torchrun formed (`world`), this node's part in it and
how a round's failures are read, the torchrun command line, this node's part of each sharded save, and the
fence that keeps a world left in a region the job moved from from publishing.

It may import the `instance`, `records`, `watches` and `program` wings, `trainer.storage`, the rendezvous's
round record (`trainer.distributed.rounds`, torch-free), the regions controller's record name
(`trainer.capacity.regions.place_record`) and the shelf. The strategies that use it
(`several_nodes`, `several_uploads`, `several_endings`) live in the agent's root beside `one_node`.
"""
