"""Where one checkpoint goes in S3, decided once per upload: a save DCP wrote in shards goes as this node's
part of its step (step_parts.py), any other whole, under the job's lease where this node holds one
(checkpoint_store.py). Either publishes latest.json itself once its step is whole, so nothing is handed back
up to the agent on the way."""

from __future__ import annotations

from dataclasses import dataclass

from ..s3.lease import Lease
from ..saves import shards
from ..saves.layouts import Checkpoint
from ..upload_outcome import UploadOutcome
from .checkpoint_store import CheckpointStore
from .step_parts import StepParts


@dataclass(frozen=True)
class StepSender:
    store: CheckpointStore
    lease: Lease | None = None  # fences a writer that lost it; several nodes hold none
    parts: StepParts | None = None  # several nodes: each sends its own ranks' shards

    def send(self, checkpoint: Checkpoint) -> UploadOutcome:
        if self.parts is not None and shards.is_sharded(checkpoint.path):
            return self.parts.upload(checkpoint.path, checkpoint.step)
        return self.store.upload(checkpoint.path, checkpoint.step, lease=self.lease)
