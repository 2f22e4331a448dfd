"""What a node of several sends to S3 beyond a single node's uploads (uploads.py): whole checkpoints only
while it publishes in its round, and every node its own shards of a save DCP wrote in shards
(sharded_saves.py). No lease fences it: the rendezvous and step fencing do."""

from __future__ import annotations

import threading

from ...storage.saves.layouts import Checkpoint
from ...storage.steps.remote import RemoteStore, RemoteStoreError
from ...storage.steps.step_sender import StepSender
from ..node.restore import Restore
from ..node.uploads import NodeUploads
from ..records.telemetry import RunTelemetry
from .round_part import RoundPart
from .sharded_saves import PART_WAIT_SECONDS, ShardedSaves, wait_for_part


class SeveralUploads(NodeUploads):
    def __init__(self, *, store: RemoteStore, restore: Restore, rounds: RoundPart, telemetry: RunTelemetry,
                 sharded: ShardedSaves, uploaded_step: int | None, stop_requested: threading.Event,
                 grace_seconds: float, poll_seconds: float) -> None:
        self.rounds, self.sharded = rounds, sharded
        super().__init__(store=store, sender=StepSender(store, parts=sharded.parts), restore=restore,
                         telemetry=telemetry, uploaded_step=uploaded_step, stop_requested=stop_requested,
                         grace_seconds=grace_seconds, poll_seconds=poll_seconds)

    def publishes(self) -> bool:
        return self.rounds.publishes()

    def offer_newest(self, *, writer_done: bool, publishes: bool = True) -> Checkpoint | None:
        """The publisher's whole checkpoint, then this node's own shards: every node sends those, publisher
        or not."""
        newest = super().offer_newest(writer_done=writer_done, publishes=publishes)
        if (part := self.sharded.ready(writer_done=writer_done, above=self.uploader.offered_step)) is not None:
            self.offer(part)
        self.sharded.check(self.store.latest_step)
        return newest

    def settle_parts(self) -> None:
        """The command has stopped: this node's part of its newest sharded save goes up, once the
        coordinator's record shows that save ended on every rank (waited for, bounded)."""
        try:  # a save S3 already holds, or a newer one, waits for nobody
            latest = self.store.latest_step()
        except RemoteStoreError:
            latest = None
        above = max((step for step in (self.uploader.uploaded_step, latest) if step is not None), default=None)
        if self.sharded.pending_here(above) is not None:
            self.telemetry.log("waiting for the node holding .metadata to send its part of the newest save here, "
                               "so that this node's shards follow")
        bound = min(self.grace_seconds, PART_WAIT_SECONDS)
        part = wait_for_part(self.sharded, above, bound, self.stop_requested, self.poll_seconds)
        if part is not None:  # a part whose upload failed goes once more; one sent already is not offered again
            self.offer(part, retry=True, writer_done=True)
        self.uploader.drain()

    def newest_final(self) -> Checkpoint | None:
        """The newest whole checkpoint here, or this disk's part of a newer sharded save as its coordinator."""
        local = super().newest_final()
        part = self.sharded.coordinator_part(writer_done=True)
        return part if part is not None and (local is None or part.step > local.step) else local

    def why_not_in_s3(self, final: Checkpoint) -> str:
        part = self.sharded.coordinator_part(writer_done=True)
        if part is not None and part.step == final.step:
            awaited = self.sharded.awaited(final.step)
            return f"the final checkpoint (step {final.step}) is not whole in S3 yet: {awaited}"
        return super().why_not_in_s3(final)
