"""Under torchrun, the round decides how many nodes Lightning trains on.

Lightning refuses to start unless its `num_nodes` times `devices` equals torchrun's WORLD_SIZE
(TorchElasticEnvironment.validate_settings). On spot the number of nodes changes from round to round
as nodes are lost and replaced, so no number written in a script is right for every round, and a
script written for one node passes none. A Trainer built under torchrun therefore gets
`num_nodes = GROUP_WORLD_SIZE`, torchrun's own count of the nodes in this round; rank 0 says so when
that differs from what the script passed.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from .init_arguments import before_init

if TYPE_CHECKING:
    from inspect import BoundArguments

MODULES = ("lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer")
NODES_IN_ROUND = "GROUP_WORLD_SIZE"  # set by torchrun for every worker, new each round


def nodes_in_round() -> int | None:
    value = os.environ.get(NODES_IN_ROUND, "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def follow_the_round(module: ModuleType) -> None:
    before_init(module.Trainer, this_rounds_nodes)


def this_rounds_nodes(bound: BoundArguments) -> None:
    nodes = nodes_in_round()
    given = bound.arguments.get("num_nodes", bound.signature.parameters["num_nodes"].default)
    if nodes is not None and given != nodes:
        bound.arguments["num_nodes"] = nodes
        if os.environ.get("RANK", "0") == "0":
            print(f"spot-trainer: Lightning's num_nodes={given} replaced by {nodes}, the nodes in this "
                  f"round ({NODES_IN_ROUND})", file=sys.stderr, flush=True)
