"""How the agent's part in a job ends: interrupted, done, failed for good or stopped at the spending cap.
Each ending records its state and event, says what is safe in S3, and lets the instance go (scaling
the group to zero when the job itself is over). Several nodes add endings of their own: ended by a
peer, after the publisher (several_nodes/endings.py)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ...costs.pauses import user_events
from ...storage.checkpoint_versions import step_text
from ...storage.record_kinds import EventKind, JobState
from ...storage.steps.remote import RemoteStore, RemoteStoreError
from ..instance.config import AgentConfig
from ..instance.own_group import SCALE_IN_WAIT_SECONDS, OwnGroup
from ..records.status import StatusReporter
from ..records.telemetry import RunTelemetry
from ..watches.notice_watch import SCALE_IN_REASON

EXIT_FAILED = 3  # the job failed for good: systemd must not restart the agent (RestartPreventExitStatus)


@dataclass
class Endings:
    config: AgentConfig
    store: RemoteStore
    telemetry: RunTelemetry
    group: OwnGroup
    stop_requested: threading.Event

    def stopped(self, reason: str, step: int | None) -> int:
        """The command was stopped (a notice, a stop request): an interruption. Even an exit 0 after the
        stop signal is an interruption: a script that exits 0 on SIGTERM must not end the job; had it
        finished, the next run confirms DONE."""
        return self.interrupted(reason, step)

    def interrupted(self, reason: str, step: int | None) -> int:
        reporter = self._reporter()
        paused = self._stopped_by_a_pause(reason)
        reporter.update(state=JobState.INTERRUPTED, interruptions=reporter.status.interruptions + (not paused),
                        reason=reason)
        step = self.saved_step(step)
        self.telemetry.event(EventKind.INTERRUPTION, reason=reason, step=step, **({"paused": True} if paused else {}))
        self.group.release()
        if step is None:
            saved = "no checkpoint yet"
        elif self._confirmed_in_s3(step):
            saved = f"checkpoint {step_text(step)} is safe in S3"
        else:
            saved = f"checkpoint step {step} could not be read back from S3"
        self.log(f"interrupted ({reason}); {saved}")
        return 0

    def _stopped_by_a_pause(self, reason: str) -> bool:
        """A scale-in while `spot-trainer pause` is in effect: the pause's stop, which loses no instance."""
        if reason != SCALE_IN_REASON:
            return False
        try:
            changes = user_events(self.store.events(EventKind.PAUSED, EventKind.RESUMED))
        except RemoteStoreError:  # not known: counted as the stop it looks like
            return False
        return bool(changes) and changes[-1].kind == EventKind.PAUSED

    def done(self, step: int | None) -> int:
        # The event first: a peer that sees status.json DONE then finds the event, with the step, beside it.
        self.telemetry.event(EventKind.DONE, step=step)
        self._reporter().update(state=JobState.DONE)
        self._end_job(f"training finished at checkpoint {step_text(step) if step is not None else 'none'}")
        return 0

    def stopped_by_budget(self, reason: str, step: int | None) -> int:
        """At the spending cap: neither done nor failed. A higher cap and capacity resume the job."""
        self._reporter().update(state=JobState.STOPPED_BY_BUDGET, reason=reason)
        saved = f"checkpoint step {step} is in S3" if step is not None else "no checkpoint yet"
        self.record_budget_stop(reason, step)
        self._end_job(f"stopped at the budget ({reason}); {saved}")  # whoever recorded it: the group goes to zero
        return 0

    def failed(self, reason: str, failures: int, *, keep_instance: bool = False) -> int:
        self._reporter().update(state=JobState.FAILED, reason=reason, failures=failures)
        self.telemetry.event(EventKind.FAILED, reason=reason)
        self._end_job(f"giving up after {failures} failures: {reason}" if failures else f"giving up: {reason}",
                      keep_instance=keep_instance)
        return EXIT_FAILED

    def saved_step(self, step: int | None) -> int | None:
        """The step an interruption says is saved: the newest this node uploaded."""
        return step

    def record_budget_stop(self, reason: str, step: int | None) -> None:
        self.telemetry.event(EventKind.BUDGET, reason=reason, step=step, budget_usd=self.config.budget_usd)

    def _end_job(self, message: str, *, keep_instance: bool = False) -> None:
        """Done or failed for good: scale the group to zero, then let this instance go as well (it is
        next to drain: its hook is completed as soon as the group picks it). With `keep_instance` (the
        newest checkpoint is only on this disk) the hook is left to time out, so there is time to copy it."""
        self.group.scale_to_zero()
        self.log(message)
        if keep_instance and self.config.lifecycle_hook:
            self.log(f"this instance is kept until its lifecycle hook {self.config.lifecycle_hook} times out: "
                     f"copy what {self.config.checkpoint_dir} holds before then")
            return
        if keep_instance:
            self.log(f"no lifecycle hook keeps this instance: copy what {self.config.checkpoint_dir} holds now")
        self.group.release(SCALE_IN_WAIT_SECONDS, self.config.poll_seconds, self.stop_requested)

    def _confirmed_in_s3(self, step: int | None) -> bool:
        """Read back: latest.json names `step` or later and its manifest is there."""
        if step is None:
            return False
        try:
            in_s3 = self.store.latest_step()
            return in_s3 is not None and in_s3 >= step and self.store.has_checkpoint(step)
        except RemoteStoreError:
            return False

    def _reporter(self) -> StatusReporter:
        assert self.telemetry.reporter is not None, "status is created once the lease is held"
        return self.telemetry.reporter

    def log(self, line: str) -> None:
        self.telemetry.log(line)
