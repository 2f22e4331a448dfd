"""How the agent's part in a job ends: interrupted, done, failed for good, stopped at the spending cap,
or ended by a peer. Each ending records its state and event, says what is safe in S3, and lets the
instance go (scaling the group to zero when the job itself is over)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..costs.pauses import user_events
from ..settings import FINAL_UPLOAD_ALLOWANCE_SECONDS
from ..storage import job_keys
from ..storage.record_kinds import EventKind, JobState
from ..storage.remote import RemoteStore, RemoteStoreError
from .config import AgentConfig
from .notice_watch import SCALE_IN_REASON, NoticeWatch
from .own_group import SCALE_IN_WAIT_SECONDS, OwnGroup
from .status import StatusReporter
from .telemetry import RunTelemetry
from .world import World

EXIT_FAILED = 3  # the job failed for good: systemd must not restart the agent (RestartPreventExitStatus)


@dataclass
class Endings:
    config: AgentConfig
    store: RemoteStore
    telemetry: RunTelemetry
    group: OwnGroup
    world: World
    notices: NoticeWatch
    stop_requested: threading.Event
    started_at: float  # a peer's ending counts from here on
    instance_id: str

    def stopped(self, reason: str, step: int | None) -> int:
        """The command was stopped (a notice, a stop request): an interruption, unless a peer ended the job
        (its scale-in is what stopped this node). Even an exit 0 after the stop signal is an interruption:
        a script that exits 0 on SIGTERM must not end the job; had it finished, the next run confirms DONE."""
        if self.config.distributed and (ending := self.world.ended_by_a_peer(self.started_at)):
            return self.ended_elsewhere(ending)
        return self.interrupted(reason, step)

    def interrupted(self, reason: str, step: int | None) -> int:
        reporter = self._reporter()
        paused = self._stopped_by_a_pause(reason)
        reporter.update(state=JobState.INTERRUPTED, interruptions=reporter.status.interruptions + (not paused),
                        reason=reason)
        if step is None and self.config.distributed:  # rank 0 may have saved on another node
            step = self.store.latest_step()
        self.telemetry.event(EventKind.INTERRUPTION, reason=reason, step=step, **({"paused": True} if paused else {}))
        self.group.release()
        if step is None:
            saved = "no checkpoint yet"
        elif self._confirmed_in_s3(step):
            saved = f"checkpoint step {step} is safe in S3"
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
        self._end_job(f"training finished at checkpoint step {step}")
        return 0

    def after_the_publisher(self) -> int:
        """Several nodes, the command finished on a node that does not publish: the job is DONE only once
        the publisher has its final state in S3, so this node never ends the job (nor scales the group
        under the publisher's upload); it leaves with the publisher's recorded end, waited for bounded."""
        bound = self.config.grace_seconds + FINAL_UPLOAD_ALLOWANCE_SECONDS
        self.log(f"the command finished; waiting up to {bound:.0f}s for the node that publishes to have the final "
                 "state in S3 and end the job")
        awaited = self.world.await_ending(self.started_at, bound, self.notices.reason)
        if awaited.ending is not None:
            return self.ended_elsewhere(awaited.ending)
        if awaited.notice is not None:  # taken away while the publisher uploads: this node's part is over
            return self.interrupted(awaited.notice, None)
        # No end recorded in time (the publisher lost, or its upload slower than the bound). Ending DONE could
        # claim a final state S3 does not hold, and scaling to zero would stop a publisher still uploading:
        # the job stays the publisher's to end, and the stall alarm's if it never does.
        try:
            step = self.store.latest_step()
            newest = "none yet" if step is None else str(step)
        except RemoteStoreError as error:
            newest = f"unknown ({error})"
        self.telemetry.warn(f"the command finished here, but the node that publishes recorded no end of the job "
                            f"within {bound:.0f}s (newest step in S3: {newest}): the job is not marked DONE and its "
                            "group is not scaled to zero; the node that publishes ends it once its final state is "
                            "in S3, else the stall alarm reports the job")
        return 0

    def stopped_by_budget(self, reason: str, step: int | None) -> int:
        """At the spending cap: neither done nor failed. A higher cap and capacity resume the job."""
        if self.config.distributed and (ending := self.world.ended_by_a_peer(self.started_at)):
            return self.ended_elsewhere(ending)
        self._reporter().update(state=JobState.STOPPED_BY_BUDGET, reason=reason)
        saved = f"checkpoint step {step} is in S3" if step is not None else "no checkpoint yet"
        if self._first_to_record_budget_stop(reason, step):
            self.telemetry.event(EventKind.BUDGET, reason=reason, step=step, budget_usd=self.config.budget_usd)
        self._end_job(f"stopped at the budget ({reason}); {saved}")  # whoever recorded it: the group goes to zero
        return 0

    def ended_elsewhere(self, ending: dict[str, Any]) -> int:
        """A peer finished the job, gave up on it or stopped it at its budget: the record says what it
        said, not "interrupted"."""
        if ending.get("kind") == EventKind.BUDGET:
            self._reporter().update(state=JobState.STOPPED_BY_BUDGET, reason=str(ending.get("reason") or ""))
            self.log("another node stopped the job at its budget; this one leaves too")
        elif ending.get("kind") == EventKind.FAILED:
            reason = str(ending.get("reason") or "")
            self._reporter().update(state=JobState.FAILED, reason=reason)
            self.log(f"another node gave up on the job ({reason}); this one leaves too")
        else:
            self._reporter().update(state=JobState.DONE)
            step = ending.get("step")
            at = f" at checkpoint step {step}" if step is not None else ""
            self.log(f"another node finished the job{at}; this one leaves too")
        self.group.release()
        return EXIT_FAILED if ending.get("kind") == EventKind.FAILED else 0

    def failed(self, reason: str, failures: int, *, keep_instance: bool = False) -> int:
        self._reporter().update(state=JobState.FAILED, reason=reason, failures=failures)
        self.telemetry.event(EventKind.FAILED, reason=reason)
        self._end_job(f"giving up after {failures} failures: {reason}" if failures else f"giving up: {reason}",
                      keep_instance=keep_instance)
        return EXIT_FAILED

    def _first_to_record_budget_stop(self, reason: str, step: int | None) -> bool:
        """Several nodes stop at the cap together: the first to create the cap's stop record says so (one
        event, one notification). A record left by an earlier stop at the same cap counts as said. When
        S3 cannot tell, this node says it: a second notice beats none."""
        if not self.config.distributed:
            return True
        record = {"reason": reason, "step": step, "instance": self.instance_id}
        try:
            return self.store.create_once(job_keys.budget_stop(self.config.budget_usd), record)
        except RemoteStoreError as error:
            self.log(f"could not record the budget stop once for all nodes ({error}); recording it here")
            return True

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
