"""A Lightning ModelCheckpoint that names no dirpath saves into CHECKPOINT_DIR under the agent.

Left to itself it saves into `lightning_logs/version_<N>/checkpoints`, and N grows with every run,
so a replacement instance could never find, nor the agent upload, what the last one saved. The
default checkpointing a plain `L.Trainer()` adds is such a ModelCheckpoint: with this, an unmodified
script's end-of-epoch checkpoints reach S3. A dirpath the script gives is kept.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING

from .init_arguments import before_init

if TYPE_CHECKING:
    from inspect import BoundArguments

MODULES = ("lightning.pytorch.callbacks.model_checkpoint", "pytorch_lightning.callbacks.model_checkpoint")


def save_into_checkpoint_dir(module: ModuleType) -> None:
    before_init(module.ModelCheckpoint, default_dirpath)


def default_dirpath(bound: BoundArguments) -> None:
    if bound.arguments.get("dirpath") is None:
        bound.arguments["dirpath"] = os.environ["CHECKPOINT_DIR"]
