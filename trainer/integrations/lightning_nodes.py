"""Under torchrun, the round decides how many nodes Lightning trains on.

Lightning refuses to start unless its `num_nodes` times `devices` equals torchrun's WORLD_SIZE
(TorchElasticEnvironment.validate_settings). On spot the number of nodes changes from round to round
as nodes are lost and replaced, so no number written in a script is right for every round, and a
script written for one node passes none. A Trainer built under torchrun therefore gets
`num_nodes = GROUP_WORLD_SIZE`, torchrun's own count of the nodes in this round; rank 0 says so when
that differs from what the script passed.
"""

from __future__ import annotations

import functools
import os
import sys
from types import ModuleType
from typing import Any

MODULES = ("lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer")
NODES_IN_ROUND = "GROUP_WORLD_SIZE"  # set by torchrun for every worker, new each round


def nodes_in_round() -> int | None:
    value = os.environ.get(NODES_IN_ROUND, "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def follow_the_round(module: ModuleType) -> None:
    import inspect  # here, not at start-up: only a process that imports Lightning pays for it

    trainer = module.Trainer
    initialise = trainer.__init__
    signature = inspect.signature(initialise)

    @functools.wraps(initialise)
    def with_this_rounds_nodes(*args: Any, **kwargs: Any) -> None:
        nodes = nodes_in_round()
        bound = signature.bind(*args, **kwargs)
        given = bound.arguments.get("num_nodes", signature.parameters["num_nodes"].default)
        if nodes is not None and given != nodes:
            bound.arguments["num_nodes"] = nodes
            if os.environ.get("RANK", "0") == "0":
                print(f"spot-trainer: Lightning's num_nodes={given} replaced by {nodes}, the nodes in this "
                      f"round ({NODES_IN_ROUND})", file=sys.stderr, flush=True)
        initialise(*bound.args, **bound.kwargs)

    trainer.__init__ = with_this_rounds_nodes
