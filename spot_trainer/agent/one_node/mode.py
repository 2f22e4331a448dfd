"""A node alone with its job: it trains only while it holds the job's lease, publishes every checkpoint,
and counts its failed runs against the restart budget, backing off before each start again."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...storage.record_kinds import EventKind
from ...storage.s3.lease import Lease
from ...storage.saves.layouts import Checkpoint
from ...storage.steps.step_sender import StepSender
from ..instance.config import AgentConfig
from ..node.endings import Endings
from ..node.keep_outputs import keep_final_outputs
from ..node.mode import Launch, Polled
from ..node.restore import Restore
from ..node.uploads import NodeUploads
from ..program.command import program_argv
from ..records.status import utc_text
from ..records.telemetry import RunTelemetry
from ..watches.notice_watch import NoticeWatch
from .lease_keeper import LeaseKeeper

# The contract's world of one: a script written for torchrun reads the same names.
SINGLE_NODE_ENV = {"NODE_RANK": "0", "NNODES": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@dataclass
class OneNode:
    config: AgentConfig
    lease: Lease
    telemetry: RunTelemetry
    notices: NoticeWatch
    stop_requested: threading.Event
    restore: Restore
    endings: Endings
    failures: int = 0  # failed runs in a row
    reason: str = ""  # why the last run failed
    _keeper: LeaseKeeper | None = None

    @property
    def watches_progress(self) -> bool:
        return self.config.restart_on_stall

    def run(self, train: Callable[[], int]) -> int:
        """One agent per job trains at a time: it waits for the lease and keeps it renewed while it trains."""
        if not self._wait_for_lease():
            self.telemetry.log("stopped while waiting for the job lease; nothing to do")
            self.endings.group.release()  # a standby chosen for scale-in has nothing to save
            return 0
        self._keeper = LeaseKeeper(self.lease, self.config.lease_ttl_seconds, self.telemetry.log).start()
        try:
            return train()
        finally:
            self._keeper.release()

    def _wait_for_lease(self) -> bool:
        announced = False
        while not self.lease.acquire():
            if not announced:
                held = self.lease.held_by
                holder = f" ({held.owner}, token {held.token}, expiring {utc_text(held.expires_at)})" if held else ""
                self.telemetry.log(f"another agent holds the job lease{holder}; waiting for it to finish, expire or "
                                   f"go unrenewed for {self.config.lease_ttl_seconds:.0f}s")
                self.telemetry.event(EventKind.LEASE_WAIT, holder=held.owner if held else None)
                announced = True
            if self.notices.reason() or self.stop_requested.wait(self.config.poll_seconds):
                return False
        self.telemetry.log(f"took the job lease (token {self.lease.token})")
        return True

    def lease_lost(self) -> bool:
        return self._keeper is not None and self._keeper.lost.is_set()

    def uploads(self, uploaded_step: int | None) -> NodeUploads:
        config = self.config
        store = self.restore.store
        return NodeUploads(store=store, sender=StepSender(store, lease=self.lease), restore=self.restore,
                           telemetry=self.telemetry, uploaded_step=uploaded_step, stop_requested=self.stop_requested,
                           grace_seconds=config.grace_seconds, poll_seconds=config.poll_seconds)

    def launch(self) -> Launch:
        return Launch(program_argv(self.config.program, self.config.train_args), SINGLE_NODE_ENV)

    def poll(self, uploads: NodeUploads, *, exited: bool) -> Polled:
        return Polled(uploads.offer_newest(writer_done=exited))

    def failed(self, reason: str, code: int) -> bool:
        self.failures, self.reason = self.failures + 1, reason
        self.telemetry.event(EventKind.FAILURE, exit_code=code, reason=reason, failures=self.failures)
        self.telemetry.log(f"training failed ({self.failures}/{self.config.restart_budget}): {reason}")
        if self.failures >= max(1, self.config.restart_budget):
            return True
        self.telemetry.update(failures=self.failures)
        # Back off a little (a device or a mount that is not ready yet); a stop request cuts it short.
        self.stop_requested.wait(min(60.0, self.config.poll_seconds * 2 ** (self.failures - 1)))
        return False

    def gave_up(self) -> int:
        return self.endings.failed(self.reason, self.failures)

    def next_start(self, uploads: NodeUploads, resume_from: Checkpoint | None) -> Checkpoint | None:
        return self.restore.restart_point(resume_from)

    def finished(self, uploads: NodeUploads, newest: int | None) -> int:
        """DONE once the final checkpoint is in S3."""
        if missing := uploads.final_missing(newest):
            return self.endings.failed(missing, self.failures, keep_instance=True)
        keep_final_outputs(self.telemetry, Path(self.config.checkpoint_dir))
        return self.endings.done(newest)

    def saved_elsewhere(self) -> bool:
        return False
