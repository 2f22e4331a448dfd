"""Lightning: `L.Trainer(..., callbacks=[checkpoints, SpotCheckpoint()])`.

Lightning already notices SIGTERM (the agent's default stop signal): it lets the batch in flight
finish and then ends `fit` with a SIGTERMException, saving nothing. This callback saves a checkpoint
at that moment, named as ModelCheckpoint names its own (`epoch=E-step=N.ckpt`) in CHECKPOINT_DIR, so
the agent uploads it and `ckpt_path="last"` resumes from it, and makes the process exit with
128 + SIGTERM rather than 0, so a script's code after `fit` does not run on a half-trained model.
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

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        emit("resumed" if trainer.global_step else "started", step=trainer.global_step)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        self.steps.step(trainer.global_step)

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        emit("checkpoint", step=trainer.global_step)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if not isinstance(exception, SIGTERMException):
            return
        path = checkpoint_directory(trainer) / f"epoch={trainer.current_epoch}-step={trainer.global_step}.ckpt"
        trainer.save_checkpoint(path)
        emit("emergency_checkpoint", step=trainer.global_step, signal="SIGTERM")
        exception.code = 128 + int(signal.SIGTERM)  # Lightning re-raises this same exception

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        emit("done", step=trainer.global_step)
