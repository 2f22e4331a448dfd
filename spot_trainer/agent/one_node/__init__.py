"""A node alone with its job: the mode (`mode`), the lease it trains under kept renewed (`lease_keeper`),
and how it is built (`wiring`: `build`, the one name the supervisor takes from here).

It may import the `instance`, `records`, `watches`, `program` and `node` wings, `spot_trainer.storage` and the
shelf; never `several_nodes`.
"""

from .wiring import build

__all__ = ["build"]
