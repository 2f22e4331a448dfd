"""What this node sends to S3 and when: each new checkpoint offered while the command runs, what it
left settled once it stops, and the final checkpoint confirmed in S3 before the job may end DONE. On
several nodes the node that publishes sends whole checkpoints, and every node its own shards of a save
DCP wrote in shards (sharded_saves.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..rounds import Round
from ..storage import layouts, shards, upload_rules
from ..storage.layouts import Checkpoint
from ..storage.lease import Lease
from ..storage.remote import RemoteStore, RemoteStoreError
from ..storage.upload_outcome import UploadOutcome
from ..storage.uploader import CheckpointUploader
from .restore import Restore
from .round_part import RoundPart
from .sharded_saves import PART_WAIT_SECONDS, ShardedSaves, wait_for_part
from .telemetry import RunTelemetry


class NodeUploads:
    def __init__(self, *, store: RemoteStore, lease: Lease | None, restore: Restore, rounds: RoundPart,
                 telemetry: RunTelemetry, sharded: ShardedSaves | None, uploaded_step: int | None,
                 stop_requested: threading.Event, grace_seconds: float, poll_seconds: float) -> None:
        self.store, self.lease, self.restore, self.rounds = store, lease, restore, rounds  # lease: single node only
        self.telemetry, self.sharded, self.stop_requested = telemetry, sharded, stop_requested
        self.grace_seconds, self.poll_seconds = grace_seconds, poll_seconds
        self.uploader = CheckpointUploader(self.send, telemetry.uploaded, uploaded_step=uploaded_step,
                                           log=telemetry.log, warn=telemetry.upload_warning)
        store.on_left_out = self.uploader.health.left_out
        self.rules_said: set[str] = set()  # upload_rules.rule_key of each rule line said

    def send(self, path: Path, step: int) -> UploadOutcome:
        """The uploader's work: a checkpoint written in shards on several nodes goes up as this node's part."""
        if self.sharded is not None and shards.is_sharded(path):
            return self.sharded.upload(path, step)
        return UploadOutcome.of(self.store.upload(path, step, lease=self.lease))

    def offer_newest(self, exited: bool, round_: Round | None) -> Checkpoint | None:
        """The newest complete checkpoint here, offered for upload when this node publishes or hands a
        finished round over (round_part.py)."""
        handover = self.rounds.handover(round_)
        self._say_upload_rule()
        newest = self.restore.newest(writer_done=exited or handover)
        if newest is not None and (self.rounds.publishes(round_) or handover):
            self.uploader.offer(newest.step, newest.path)
        if self.sharded is not None:  # every node sends its own shards, publisher or not
            if (part := self.sharded.ready(writer_done=exited or handover,
                                           above=self.uploader.offered_step)) is not None:
                self.uploader.offer(part.step, part.path)
            self.sharded.check(self.store.latest_step)
        return newest

    def _say_upload_rule(self) -> None:
        """Once per name shape and rule: when the newest file goes up, and what would make it go up sooner."""
        entry = layouts.newest_entry(self.restore.directory)
        line = upload_rules.rule_line(entry) if entry is not None else None
        if line is not None and (key := upload_rules.rule_key(line)) not in self.rules_said:
            self.rules_said.add(key)
            self.telemetry.log(line)

    def settle(self) -> int | None:
        """Offer the newest checkpoint, wait for it to be safe in S3; the step now in S3. The command
        has stopped: what it left can no longer change, so it may go up from its own files."""
        newest = self.restore.newest(writer_done=True) if self.rounds.publishes() else None
        if newest is not None:
            self.uploader.offer(newest.step, newest.path, writer_done=True)
        self.settle_parts()
        self.uploader.drain()
        if newest is not None and self.uploader.offer(newest.step, newest.path, retry=True, writer_done=True):
            self.telemetry.log(f"retrying the upload of checkpoint step {newest.step}")
            self.uploader.drain()
        return self.uploader.uploaded_step

    def settle_parts(self) -> None:
        """Several nodes, the command has stopped: this node's part of its newest sharded save goes up, once
        the coordinator's record shows that save ended on every rank (waited for, bounded)."""
        if self.sharded is None:
            return
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
            self.uploader.offer(part.step, part.path, retry=True, writer_done=True)
        self.uploader.drain()

    def final_missing(self, uploaded: int | None) -> str:
        """DONE needs the final checkpoint in S3: retried for up to the grace period (S3 may be having a bad
        minute); '' once it is there, else why the job must not end DONE."""
        deadline = time.monotonic() + self.grace_seconds
        while missing := self._final_not_in_s3(uploaded):
            if time.monotonic() >= deadline or self.stop_requested.is_set():
                return missing
            self.telemetry.log(f"{missing}; retrying its upload")
            uploaded = self.settle()
            self.stop_requested.wait(min(5.0, max(0.0, deadline - time.monotonic())))
        return ""

    def _final_not_in_s3(self, uploaded: int | None) -> str:
        """Why the job must not end DONE: its newest checkpoint is only on this disk ('' when in S3)."""
        local = self.restore.newest(writer_done=True)
        part = self.sharded.coordinator_part(writer_done=True) if self.sharded is not None else None
        if part is not None and (local is None or part.step > local.step):
            local = part
        if local is None or (uploaded is not None and local.step <= uploaded):
            return ""
        try:
            in_s3 = self.store.latest_step()
        except RemoteStoreError as error:
            return f"the final checkpoint (step {local.step}) could not be confirmed in S3 ({error})"
        if in_s3 is not None and in_s3 >= local.step:
            return ""
        if part is not None and self.sharded is not None and part.step == local.step:
            awaited = self.sharded.awaited(local.step)
            return f"the final checkpoint (step {local.step}) is not whole in S3 yet: {awaited}"
        return f"the final checkpoint (step {local.step}) did not reach S3: it is only on this instance's disk"

    def close(self) -> None:
        self.uploader.close()
