"""A sender for the uploader's own tests: what S3 would do with each checkpoint, played by a function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spot_trainer.storage.saves.layout_kinds import Layout
from spot_trainer.storage.saves.layouts import Checkpoint
from spot_trainer.storage.upload_outcome import UploadOutcome


@dataclass(frozen=True)
class SendsBy:
    upload: Callable[[Path, int], UploadOutcome]  # the (staged) path and the step

    def send(self, checkpoint: Checkpoint) -> UploadOutcome:
        return self.upload(checkpoint.path, checkpoint.step)


def step_folder(step: int, path: Path) -> Checkpoint:
    """A `step-<N>` folder as the agent offers it."""
    return Checkpoint(step, path, Layout.OURS)
