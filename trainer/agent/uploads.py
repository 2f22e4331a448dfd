"""What this node sends to S3 and when: each new checkpoint offered while the command runs, what it
left settled once it stops, and the final checkpoint confirmed in S3 before the job may end DONE. On
several nodes, SeveralUploads (several_uploads.py) adds who publishes and each node's own shards."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ..storage.s3.lease import Lease
from ..storage.saves import layouts, upload_rules
from ..storage.saves.layouts import Checkpoint
from ..storage.steps.remote import RemoteStore, RemoteStoreError
from ..storage.steps.uploader import CheckpointUploader
from ..storage.upload_outcome import UploadOutcome
from .records.telemetry import RunTelemetry
from .restore import Restore


class NodeUploads:
    def __init__(self, *, store: RemoteStore, lease: Lease | None, restore: Restore, telemetry: RunTelemetry,
                 uploaded_step: int | None, stop_requested: threading.Event, grace_seconds: float,
                 poll_seconds: float) -> None:
        self.store, self.lease, self.restore = store, lease, restore  # lease: fences a writer that lost it
        self.telemetry, self.stop_requested = telemetry, stop_requested
        self.grace_seconds, self.poll_seconds = grace_seconds, poll_seconds
        self.uploader = CheckpointUploader(self.send, telemetry.uploaded, uploaded_step=uploaded_step,
                                           log=telemetry.log, warn=telemetry.upload_warning)
        store.on_left_out = self.uploader.health.left_out
        self.rules_said: set[str] = set()  # upload_rules.rule_key of each rule line said

    def send(self, path: Path, step: int) -> UploadOutcome:
        """The uploader's work: one checkpoint to S3, under the lease where this node holds one."""
        return UploadOutcome.of(self.store.upload(path, step, lease=self.lease))

    def publishes(self) -> bool:
        """Whether this node sends whole checkpoints: a node alone always does."""
        return True

    def offer_newest(self, *, writer_done: bool, publishes: bool = True) -> Checkpoint | None:
        """The newest complete checkpoint here, offered for upload when this node `publishes`."""
        self._say_upload_rule()
        newest = self.restore.newest(writer_done=writer_done)
        if newest is not None and publishes:
            self.uploader.offer(newest.step, newest.path)
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
        newest = self.restore.newest(writer_done=True) if self.publishes() else None
        if newest is not None:
            self.uploader.offer(newest.step, newest.path, writer_done=True)
        self.settle_parts()
        self.uploader.drain()
        if newest is not None and self.uploader.offer(newest.step, newest.path, retry=True, writer_done=True):
            self.telemetry.log(f"retrying the upload of checkpoint step {newest.step}")
            self.uploader.drain()
        return self.uploader.uploaded_step

    def settle_parts(self) -> None:
        """Once the command stopped, what this node sends besides whole checkpoints: nothing here."""

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
        local = self.newest_final()
        if local is None or (uploaded is not None and local.step <= uploaded):
            return ""
        try:
            in_s3 = self.store.latest_step()
        except RemoteStoreError as error:
            return f"the final checkpoint (step {local.step}) could not be confirmed in S3 ({error})"
        if in_s3 is not None and in_s3 >= local.step:
            return ""
        return self.why_not_in_s3(local)

    def newest_final(self) -> Checkpoint | None:
        """The newest checkpoint here that S3 must hold before the job is DONE."""
        return self.restore.newest(writer_done=True)

    def why_not_in_s3(self, final: Checkpoint) -> str:
        return f"the final checkpoint (step {final.step}) did not reach S3: it is only on this instance's disk"

    def close(self) -> None:
        self.uploader.close()
