"""Lightning: `L.Trainer(..., callbacks=[checkpoints, SpotCheckpoint()])`.

Lightning already notices SIGTERM (the agent's default stop signal): it lets the batch in flight
finish and then ends `fit` with a SIGTERMException, saving nothing. This callback saves a checkpoint
at that moment, named as ModelCheckpoint names its own (`epoch=E-step=N.ckpt`) in CHECKPOINT_DIR, so
the agent uploads it and `ckpt_path="last"` resumes from it, and makes the process exit with
128 + SIGTERM rather than 0, so a script's code after `fit` does not run on a half-trained model.
Under torchrun the ranks decide together (world_agreement.py), as with the Hugging Face callback.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException

from ..progress import StepLines, emit
from .stop_request import StopRequest
from .world_agreement import EX_NEW_ROUND, any_rank, in_world, step_range


def checkpoint_directory(trainer: pl.Trainer) -> Path:
    """CHECKPOINT_DIR under the agent, else where the script's ModelCheckpoint saves."""
    if os.environ.get("CHECKPOINT_DIR"):
        return Path(os.environ["CHECKPOINT_DIR"])
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, ModelCheckpoint) and callback.dirpath:
            return Path(callback.dirpath)
    return Path(trainer.default_root_dir) / "checkpoints"


class SpotCheckpoint(Callback):
    def __init__(self) -> None:
        self.steps = StepLines()
        self.stop: StopRequest | None = None  # in a world: the signal, taken over from Lightning

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        lowest, highest = step_range(trainer.global_step, trainer.strategy.root_device)
        if lowest != highest:
            # Ranks that loaded different checkpoints would train apart: all leave, and the next round
            # starts from the newest, which the agents fetch from S3 first.
            emit("group_stop", step=highest, rank=trainer.global_rank)
            emit("peer_lost", rank=trainer.global_rank,
                 reason=f"ranks resumed from steps {lowest} to {highest}: a new round starts from {highest}")
            raise SystemExit(EX_NEW_ROUND)
        if in_world():
            # Lightning would stop a rank told of SIGTERM by itself at the end of its batch: the others
            # would wait for it at the next collective. The ranks decide together instead (below).
            self.stop = StopRequest(signal.SIGTERM).install(chain=False)
        emit("resumed" if trainer.global_step else "started", step=trainer.global_step)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        self.steps.step(trainer.global_step)
        # Lightning shares only rank 0's SIGTERM with the world; a notice to another node would stop that
        # node's ranks alone. Decided together, every rank stops here, and on_exception saves once.
        if self.stop is not None and any_rank(self.stop.received or trainer.received_sigterm,
                                              trainer.strategy.root_device):
            raise SIGTERMException()

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        emit("checkpoint", step=trainer.global_step)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if not isinstance(exception, SIGTERMException):
            return
        path = checkpoint_directory(trainer) / f"epoch={trainer.current_epoch}-step={trainer.global_step}.ckpt"
        trainer.save_checkpoint(path)  # every rank takes part; rank 0 writes
        if in_world():  # every agent of the world waits for this step to reach S3 before the next round
            emit("group_stop", step=trainer.global_step, rank=trainer.global_rank)
        if trainer.is_global_zero:
            emit("emergency_checkpoint", step=trainer.global_step, signal="SIGTERM")
        exception.code = 128 + int(signal.SIGTERM)  # Lightning re-raises this same exception

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        emit("done", step=trainer.global_step)
