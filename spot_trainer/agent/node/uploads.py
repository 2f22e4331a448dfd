"""What this node sends to S3 and when: each new checkpoint offered while the command runs, what it
left settled once it stops, and the final checkpoint confirmed in S3, whole, before the job may end DONE.
A final checkpoint S3 must not or cannot take (a link, a FIFO, names too long for S3) ends that wait at
once; only what may be a bad minute is retried for the grace period. On several nodes, SeveralUploads
(several_nodes/uploads.py) adds who publishes and each node's own shards.

The one step of a checkpoint's way up that is the agent's: choosing which to offer. From the offer on, the
uploader (storage/steps/uploader.py) stages it and its sender (step_sender.py) sends and publishes it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ...storage.failure_causes import FailureCause
from ...storage.saves import layouts, upload_rules
from ...storage.saves.layouts import Checkpoint
from ...storage.steps.remote import RemoteStore, RemoteStoreError
from ...storage.steps.step_sender import StepSender
from ...storage.steps.uploader import CheckpointUploader
from ..records.telemetry import RunTelemetry
from .restore import Restore


@dataclass(frozen=True)
class Missing:
    """Why the job must not end DONE yet, for its final checkpoint `step`."""

    why: str
    step: int
    for_good: bool = False  # no retry can change it: the wait ends at once
    cause: str = ""  # its upload refused for good: the warning's cause


class NodeUploads:
    def __init__(self, *, store: RemoteStore, sender: StepSender, restore: Restore, telemetry: RunTelemetry,
                 uploaded_step: int | None, stop_requested: threading.Event, grace_seconds: float,
                 poll_seconds: float) -> None:
        self.store, self.restore = store, restore
        self.telemetry, self.stop_requested = telemetry, stop_requested
        self.grace_seconds, self.poll_seconds = grace_seconds, poll_seconds
        self.uploader = CheckpointUploader(sender, telemetry.uploaded, uploaded_step=uploaded_step,
                                           log=telemetry.log, warn=telemetry.upload_warning)
        store.on_left_out = self.uploader.health.left_out
        self.rules_said: set[str] = set()  # upload_rules.rule_key of each rule line said

    def offer(self, checkpoint: Checkpoint, *, retry: bool = False, writer_done: bool = False) -> bool:
        """`checkpoint` queued for S3 unless an equal or newer step was offered (the uploader's rules); True
        if queued."""
        return self.uploader.offer(checkpoint, retry=retry, writer_done=writer_done)

    def refusal(self, final: Checkpoint) -> tuple[str, str] | None:
        """Why no retry can send `final`, and its cause (None when one may): it is a link, or its upload was
        refused so."""
        if final.path.is_symlink():
            return f"{final.path.name} is a link, and links are never uploaded", FailureCause.LINK
        return self.uploader.refusal(final.step)

    def publishes(self) -> bool:
        """Whether this node sends whole checkpoints: a node alone always does."""
        return True

    def offer_newest(self, *, writer_done: bool, publishes: bool = True) -> Checkpoint | None:
        """The newest complete checkpoint here, offered for upload when this node `publishes`."""
        self._say_upload_rule()
        newest = self.restore.newest(writer_done=writer_done)
        if newest is not None and publishes:
            self.offer(newest)
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
            self.offer(newest, writer_done=True)
        self.settle_parts()
        self.uploader.drain()
        if newest is not None and not self.refusal(newest) and \
                self.offer(newest, retry=True, writer_done=True):
            self.telemetry.log(f"retrying the upload of checkpoint step {newest.step}")
            self.uploader.drain()
        return self.uploader.uploaded_step

    def settle_parts(self) -> None:
        """Once the command stopped, what this node sends besides whole checkpoints: nothing here."""

    def final_missing(self, uploaded: int | None) -> str:
        """DONE needs the final checkpoint in S3, whole: retried for up to the grace period (S3 may be having
        a bad minute) unless no retry can mend it; '' once it is there, else why the job must not end DONE."""
        deadline = time.monotonic() + self.grace_seconds
        while missing := self._final_not_in_s3(uploaded):
            if missing.cause:  # refused for good: warned now as the last retry's failure would have been
                self.uploader.health.failed(missing.step, missing.cause, urgent=True)
            if missing.for_good or time.monotonic() >= deadline or self.stop_requested.is_set():
                return missing.why
            self.telemetry.log(f"{missing.why}; retrying its upload")
            uploaded = self.settle()
            self.stop_requested.wait(min(5.0, max(0.0, deadline - time.monotonic())))
        return ""

    def _final_not_in_s3(self, uploaded: int | None) -> Missing | None:
        """Why the job must not end DONE (None when the final checkpoint is in S3 and would restore whole):
        its newest checkpoint is only on this disk, or what latest.json names is not whole."""
        local = self.newest_final()
        if local is None:
            return None
        try:
            in_s3 = self.store.latest_step()
            if in_s3 is not None and in_s3 >= local.step:
                damage = self.store.not_whole(in_s3)
                return Missing(f"the final checkpoint in S3 (step {in_s3}) would not restore whole ({damage}); step "
                               f"{local.step} is kept on this instance's disk", local.step, True) if damage else None
        except RemoteStoreError as error:
            return Missing(f"the final checkpoint (step {local.step}) could not be confirmed in S3 ({error})",
                           local.step)
        if refusal := self.refusal(local):
            why, cause = refusal
            return Missing(f"{self.why_not_in_s3(local)}, and no retry can send it: {why}", local.step, True, cause)
        return Missing(self.why_not_in_s3(local), local.step)

    def newest_final(self) -> Checkpoint | None:
        """The newest checkpoint here that S3 must hold before the job is DONE."""
        return self.restore.newest(writer_done=True)

    def why_not_in_s3(self, final: Checkpoint) -> str:
        return f"the final checkpoint (step {final.step}) did not reach S3: it is only on this instance's disk"

    def close(self) -> None:
        self.uploader.close()
