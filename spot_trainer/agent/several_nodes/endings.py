"""How a node's part ends when several nodes share the job, beyond a single node's endings (endings.py):
a peer that ended the job is read first (its scale-in is what stopped this node), the step saved may be
rank 0's on another node, one stop record at the spending cap for all nodes, and a node that does not
publish waits for the publisher to end the job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...settings import FINAL_UPLOAD_ALLOWANCE_SECONDS
from ...storage.record_kinds import EventKind, JobState
from ...storage.s3 import job_keys
from ...storage.steps.remote import RemoteStoreError
from ..node.endings import EXIT_FAILED, Endings
from ..watches.notice_watch import NoticeWatch
from .world import World


@dataclass
class SeveralEndings(Endings):
    world: World
    notices: NoticeWatch
    started_at: float  # a peer's ending counts from here on
    instance_id: str

    def stopped(self, reason: str, step: int | None) -> int:
        if ending := self.world.ended_by_a_peer(self.started_at):
            return self.ended_elsewhere(ending)
        return super().stopped(reason, step)

    def stopped_by_budget(self, reason: str, step: int | None) -> int:
        if ending := self.world.ended_by_a_peer(self.started_at):
            return self.ended_elsewhere(ending)
        return super().stopped_by_budget(reason, step)

    def saved_step(self, step: int | None) -> int | None:
        """Rank 0 may have saved on another node: S3's newest then."""
        return self.store.latest_step() if step is None else step

    def record_budget_stop(self, reason: str, step: int | None) -> None:
        """Several nodes stop at the cap together: the first to create the cap's stop record says so (one
        event, one notification). A record left by an earlier stop at the same cap counts as said. When
        S3 cannot tell, this node says it: a second notice beats none."""
        record = {"reason": reason, "step": step, "instance": self.instance_id}
        try:
            first = self.store.create_once(job_keys.budget_stop(self.config.budget_usd), record)
        except RemoteStoreError as error:
            self.log(f"could not record the budget stop once for all nodes ({error}); recording it here")
            first = True
        if first:
            super().record_budget_stop(reason, step)

    def after_the_publisher(self) -> int:
        """The command finished on a node that does not publish: the job is DONE only once
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
