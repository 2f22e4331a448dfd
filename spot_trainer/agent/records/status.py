"""The job's status record (`status.json` in S3) and the `status` command's view of a job.

The agent owns the record while it holds the lease; anyone with read access to the bucket can
see where the job stands, what it has survived, and why it stopped.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...costs.loss_text import describe_losses
from ...costs.lost_instances import Losses, find_losses
from ...costs.pauses import user_events
from ...storage.checkpoint_versions import step_text
from ...storage.record_kinds import FINISHED, EventKind, JobState
from ...storage.s3.job_keys import STATUS
from ...storage.s3.latest_record import LatestRecord
from .pace import Pace

STATUS_NAME = STATUS
# The states by the names the rooms that read the record import them by (storage/record_kinds.py has them all).
TRAINING, INTERRUPTED, DONE, FAILED = JobState.TRAINING, JobState.INTERRUPTED, JobState.DONE, JobState.FAILED
# How `status` reads a job that `spot-trainer pause` or `resume` moved (the record keeps the agent's INTERRUPTED).
PAUSED_STATE = "PAUSED"
PAUSING = "PAUSING"
RESUMING = "RESUMING"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def utc_text(epoch_seconds: float) -> str:
    """A moment as the log says it, e.g. 2026-11-26T06:30:00+00:00 (out of range: the raw number)."""
    try:
        return datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"{epoch_seconds:.0f}"


@dataclass
class JobStatus:
    job: str
    state: JobState = JobState.STARTING
    step: int | None = None
    loss: float | None = None
    samples_per_s: float | None = None
    checkpoint_step: int | None = None  # newest checkpoint safe in S3
    instance: str = ""
    attempt: int = 0
    interruptions: int = 0
    failures: int = 0
    reason: str = ""
    warning: str = ""  # something the user must fix, e.g. a command that saves nothing recognisable
    first_started_at: float | None = None  # epoch of the job's first start: a relative deadline counts from it
    # A deadline's line, for the capacity watch to draw while no instance runs (None: no deadline).
    deadline_at: float | None = None
    total_steps: int | None = None
    margin_seconds: float | None = None
    budget_usd: float | None = None  # the spending cap (None: none)
    seconds_per_step: float | None = None  # this instance's pace, for the cost to finish
    updated_at: str = field(default_factory=utc_now)

    @classmethod
    def carried_over(cls, previous: Mapping[str, Any] | None, job: str, instance: str) -> JobStatus:
        """A new agent's record: counters and progress carried over from its predecessor's."""
        previous = previous or {}
        return cls(
            job=job,
            instance=instance,
            step=previous.get("step"),
            checkpoint_step=previous.get("checkpoint_step"),
            attempt=int(previous.get("attempt") or 0),
            interruptions=int(previous.get("interruptions") or 0),
            first_started_at=previous.get("first_started_at") or time.time(),
        )


@dataclass
class StatusReporter:
    """Holds the live record and publishes it on every state change and warning, and at most every `interval`."""

    status: JobStatus
    publish: Callable[[dict[str, Any]], None]
    interval_seconds: float = 15.0
    clock: Callable[[], float] = time.monotonic
    pace: Pace = field(default_factory=Pace)  # the record's seconds_per_step, for the cost to finish
    _last_publish: float = 0.0
    _dirty: bool = False

    def update(self, **changes: Any) -> None:
        for name, value in changes.items():
            setattr(self.status, name, value)
        if type(step := changes.get("step")) is int and (pace := self.pace.seconds_per_step(time.time(), step)):
            self.status.seconds_per_step = round(pace, 6)
        self._dirty = True
        # A warning is read where the state is (`status`), and the instance may be gone within the interval.
        if "state" in changes or changes.get("warning"):
            self.flush()

    def tick(self) -> None:
        """Called from the poll loop: publish pending progress once the interval has passed."""
        if self._dirty and self.clock() - self._last_publish >= self.interval_seconds:
            self.flush()

    def flush(self) -> None:
        self.status.updated_at = utc_now()
        self.publish(asdict(self.status))
        self._last_publish = self.clock()
        self._dirty = False


def describe_job(
    status: Mapping[str, Any] | None, latest: LatestRecord | None, events: Iterable[Mapping[str, Any]],
    losses: Losses | None = None,
) -> str:
    """Human-readable summary for `python -m spot_trainer status`. `losses`: the instances the job lost, from its
    events and instance records (JobCost.losses); without them only the notices the events hold are known."""
    if not status and not latest:
        return "no status yet: the job has not started (or the bucket/job name is wrong)"
    status = status or {}
    events = list(events)
    kinds = Counter(str(event.get("kind", "?")) for event in events)
    state, reason = state_and_reason(status, events)
    lines = [
        f"job            {status.get('job', '?')}",
        f"state          {state}",
        f"step           {_or_dash(status.get('step'))}",
        f"loss           {_or_dash(status.get('loss'))}",
        f"checkpoint     {_checkpoint_text(latest.step if latest else status.get('checkpoint_step'))}"
        " (latest in S3)",
        f"instance       {status.get('instance') or '-'}",
        f"attempt        {status.get('attempt', 0)}",
        *describe_losses(losses or find_losses(events, (), now=0.0, job_running=False), utc_text),
        f"updated        {status.get('updated_at', '-')}",
    ]
    if reason:
        lines.append(f"reason         {reason}")
    if status.get("warning"):
        lines.append(f"warning        {status['warning']}")
    if inexact := [event for event in events if event.get("kind") == EventKind.NOT_BIT_IDENTICAL]:
        first = min(inexact, key=lambda event: event["step"] if isinstance(event.get("step"), int) else 0)
        more = f" (and {len(inexact) - 1} more)" if len(inexact) > 1 else ""
        lines.append(f"exact resume   lost from step {_or_dash(first.get('step'))}: {first.get('reason')}{more}")
    if kept := [event for event in events if event.get("kind") == EventKind.FINAL_OUTPUTS]:
        size = kept[-1].get("bytes")
        megabytes = f"{size / 1e6:.1f} MB" if isinstance(size, int) else "? MB"
        lines.append(f"final outputs  {kept[-1].get('location')} ({kept[-1].get('files')} files, {megabytes})")
    if crossed := [event for event in events if event.get("kind") == EventKind.REGION_RESTORE]:
        moved = sum(int(event.get("bytes") or 0) for event in crossed)
        lines.append(f"across regions {moved / 1e6:.1f} MB restored from another region's bucket in {len(crossed)} "
                     f"start(s), the newest step {_or_dash(crossed[-1].get('step'))} from {crossed[-1].get('region')}")
    if kinds:
        counts = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
        lines.append(f"events         {counts}")
    return "\n".join(lines)


def state_and_reason(status: Mapping[str, Any], events: list[Mapping[str, Any]]) -> tuple[str, str]:
    """The job's state and reason as the user moved it: after `spot-trainer pause` the agents stop as on a notice
    and record INTERRUPTED ("scale-in"), which the job is not; a finished job is what its record says."""
    state, reason = str(status.get("state", "?")), str(status.get("reason") or "")
    changes = user_events(events)
    if state in FINISHED or not changes:
        return state, reason
    newest = changes[-1]
    if any(e.get("kind") == EventKind.START and isinstance(e.get("epoch"), int | float) and e["epoch"] > newest.at
           for e in events):
        return state, reason  # an instance has started since: its record tells
    if newest.kind == EventKind.PAUSED:
        if state == JobState.INTERRUPTED:  # no instance trains any more
            return PAUSED_STATE, f"paused at {utc_text(newest.at)} (spot-trainer pause)"
        return PAUSING, f"paused at {utc_text(newest.at)}: the instances save their step, upload it and leave"
    if state == JobState.INTERRUPTED:
        return RESUMING, f"resumed at {utc_text(newest.at)} (spot-trainer resume): waiting for an instance to start"
    return state, reason


def _checkpoint_text(step: Any) -> str:
    """'250', or a version's time where the checkpoint states no step."""
    return step_text(step).removeprefix("step ") if type(step) is int else _or_dash(step)


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)
