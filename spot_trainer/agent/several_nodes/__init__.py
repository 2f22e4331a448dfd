"""Several nodes as one (torchrun elastic): the mode (`mode`) and how it is built (`wiring`: `build`, the
one name the supervisor takes from here); where it starts from (`restore`), what each node sends (`uploads`) and
how its part ends (`endings`); the round torchrun formed (`world`), this node's part in it and how a
round's failures are read (`round_part`, `round_failures`), the torchrun command line (`torchrun`), this
node's part of each sharded save (`sharded_saves`), and the fence that keeps a world left in a region the
job moved from from publishing (`region_fence`).

It may import the `instance`, `records`, `watches`, `program` and `node` wings, `spot_trainer.storage`, the
rendezvous's round record (`spot_trainer.distributed.rounds`, torch-free), the regions controller's record name
(`spot_trainer.capacity.regions.place_record`), `spot_trainer.settings` and the shelf; never `one_node`.
"""

from .wiring import build

__all__ = ["build"]
