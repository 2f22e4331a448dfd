"""Every instance the job lost, how, and what is known of the work redone after it: the interruptions that
`status` counts and the picture marks, from the job's events and instance records.

An instance is lost
- to a notice when its agent recorded an `interruption` while no pause was in effect (pauses.py: a stop during
  a pause is the pause's, and loses nothing);
- to a power-off when it never ended cleanly: no `stopped_at` in its record, no ending event of its own,
  no heartbeat any more (instance_records.billed_span), and neither the job's end nor a pause had come by
  its last sign of life (within one heartbeat: an instance the job's end or a pause scaled in may go before
  it writes `stopped_at`).
Instances whose agent never wrote a record (killed while booting) are not seen.

What each loss cost in work is bounded from below: the instance reached at least the highest step its records
show (the step its save held, the training step and the newest checkpoint on its disk at its last heartbeat),
and the next round started from the step it resumed from. Steps run after the last heartbeat are not seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..storage.record_kinds import JOB_ENDINGS, EventKind
from .instance_records import LAST_SEEN, InstanceLife, billed_span
from .pauses import paused_at, user_events
from .redone_work import training_stretches

# Events by which an agent says its instance's part ended.
OWN_ENDINGS = (EventKind.INTERRUPTION, *JOB_ENDINGS)


class LossKind(StrEnum):
    NOTICE = "notice"
    POWER_OFF = "power-off"


@dataclass(frozen=True)
class Loss:
    instance: str
    kind: LossKind
    # A notice: its interruption event. A power-off: the instance's last sign of life (last_sign_of_life).
    at: float
    reason: str
    trained: bool  # its agent started training (a standby waiting for the lease trains nothing)
    saved_step: int | None  # a notice: the step its save held
    record_step: int | None  # the training step in its instance record, as of its last heartbeat
    disk_checkpoint_step: int | None  # the newest checkpoint on its disk, as of its last heartbeat
    resumed_from: int | None  # the step the next round started from (0: from scratch); None: none since

    @property
    def reached(self) -> int | None:
        """The highest step it is known to have reached (a lower bound after a power-off)."""
        return max((s for s in (self.saved_step, self.record_step, self.disk_checkpoint_step) if s is not None),
                   default=None)

    @property
    def redone_at_least(self) -> int | None:
        """Steps computed again after it, at least; None when unknown (no step seen, or no round since)."""
        if not self.trained:
            return 0
        if self.resumed_from is None or self.reached is None:
            return None
        return max(0, self.reached - self.resumed_from)


@dataclass(frozen=True)
class Losses:
    lost: list[Loss]
    pause_stops: int  # agents stopped by a pause: not lost
    records: int  # instance records read: without any, power-offs cannot be seen

    @property
    def notices(self) -> int:
        return sum(loss.kind is LossKind.NOTICE for loss in self.lost)

    @property
    def power_offs(self) -> int:
        return sum(loss.kind is LossKind.POWER_OFF for loss in self.lost)


def find_losses(events: Iterable[Mapping[str, Any]], lives: Sequence[InstanceLife], *, now: float,
                job_running: bool) -> Losses:
    timed = sorted((e for e in events if _number(e.get("epoch")) is not None), key=lambda e: float(e["epoch"]))
    starts = round_starts(timed, lives)
    notices, pause_stops = notice_losses(timed, lives, starts)
    power_offs = [Loss(life.instance, LossKind.POWER_OFF, at, "lost without a notice",
                       trained=_started(timed, life.instance), saved_step=None, record_step=life.step,
                       disk_checkpoint_step=life.disk_checkpoint_step, resumed_from=next_start(starts, at))
                  for life in lives
                  if (at := powered_off_at(life, timed, now=now, job_running=job_running)) is not None]
    return Losses(sorted([*notices, *power_offs], key=lambda loss: loss.at), pause_stops, len(lives))


def notice_losses(timed: Sequence[Mapping[str, Any]], lives: Sequence[InstanceLife],
                  starts: Sequence[tuple[float, int]]) -> tuple[list[Loss], int]:
    """The instances lost to a notice, and how many agents a pause stopped instead."""
    changes = user_events(timed)
    by_instance = {life.instance: life for life in lives}
    lost: list[Loss] = []
    pause_stops = 0
    for event in (e for e in timed if e.get("kind") == EventKind.INTERRUPTION):
        at, instance = float(event["epoch"]), str(event.get("instance", ""))
        if paused_at(changes, at):
            pause_stops += 1
            continue
        life = by_instance.get(instance)
        lost.append(Loss(instance, LossKind.NOTICE, at, str(event.get("reason") or "a notice"),
                         trained=_started(timed, instance), saved_step=_step(event.get("step")),
                         record_step=life.step if life else None,
                         disk_checkpoint_step=life.disk_checkpoint_step if life else None,
                         resumed_from=next_start(starts, at)))
    return lost, pause_stops


def powered_off_at(life: InstanceLife, timed: Sequence[Mapping[str, Any]], *, now: float,
                   job_running: bool) -> float | None:
    """When `life`'s instance lost power, as nearly as measured; None when it ended otherwise or still runs."""
    if billed_span(life, now=now, job_running=job_running).ended_by != LAST_SEEN:
        return None
    if any(e.get("instance") == life.instance and e.get("kind") in OWN_ENDINGS for e in timed):
        return None
    last = last_sign_of_life(life, timed)
    reach = last + life.heartbeat_seconds  # it would have beaten again by then
    if paused_at(user_events(timed), reach) or _job_ended_by(timed, reach):
        return None
    return last


def last_sign_of_life(life: InstanceLife, timed: Iterable[Mapping[str, Any]]) -> float:
    """The newest moment the instance is known to have run: its last heartbeat, or a later event of its agent.

    The power went within one heartbeat after it (the next beat never came). It is the nearest measured time:
    the replacement sees the instance gone only once the job lease has expired and it has booted itself,
    minutes later."""
    own = [float(e["epoch"]) for e in timed if e.get("instance") == life.instance]
    return max([life.last_seen, *own])


def round_starts(timed: Sequence[Mapping[str, Any]], lives: Sequence[InstanceLife]) -> list[tuple[float, int]]:
    """(when, from which step) each round of training began: every agent's start (at the step it resumed
    from, else 0), and every round of several nodes formed again from a published step."""
    starts = [(s.started, s.first_step) for s in training_stretches(timed, lives)]
    starts += [(float(e["epoch"]), step) for e in timed
               if e.get("kind") == EventKind.ROUND_RESUME and (step := _step(e.get("step"))) is not None]
    return sorted(starts)


def next_start(starts: Sequence[tuple[float, int]], at: float) -> int | None:
    return next((step for started, step in starts if started > at), None)


def _job_ended_by(timed: Sequence[Mapping[str, Any]], at: float) -> bool:
    """The job had ended by `at`: its newest end or start recorded by then is an end (a job stopped at its
    budget may start again)."""
    marks = [e.get("kind") for e in timed
             if e.get("kind") in (*JOB_ENDINGS, EventKind.START) and float(e["epoch"]) <= at]
    return bool(marks) and marks[-1] in JOB_ENDINGS


def _started(timed: Iterable[Mapping[str, Any]], instance: str) -> bool:
    return any(e.get("kind") == EventKind.START and e.get("instance") == instance for e in timed)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _step(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
