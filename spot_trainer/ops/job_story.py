"""A job's life as its records in S3 tell it, shaped for a picture: the step over wall time, each instance's
span and market, the instances lost (to a notice or a power-off), pauses and resumes, the work redone after
each loss, spend against the cap.

Steps come from the events that carry one (a published checkpoint, a resume, an interruption's save, the
end) and from each instance record's last step; work is redone from a resume below the highest step
reached before it until training is back there. Losses are the ones `status` counts (costs/lost_instances.py),
so a pause's stops are the pause, drawn once, and never an interruption.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..costs.instance_records import InstanceLife
from ..costs.job_cost import InstanceCost
from ..costs.lost_instances import Losses, LossKind, last_sign_of_life
from ..costs.pauses import user_events
from ..storage.record_kinds import EventKind

STEP_EVENTS = (EventKind.CHECKPOINT, EventKind.RESUME, EventKind.INTERRUPTION, EventKind.DONE)


@dataclass(frozen=True)
class StepPoint:
    at: float
    step: int


@dataclass(frozen=True)
class Mark:
    at: float
    kind: str  # "interruption" (a notice), "power-off", "paused", "resumed"
    label: str
    instance: str = ""  # the instance a notice or a power-off took


@dataclass(frozen=True)
class Bar:
    instance: str
    instance_type: str
    market: str
    start: float
    end: float


@dataclass(frozen=True)
class Redone:
    start: float
    end: float
    steps: int


@dataclass(frozen=True)
class JobStory:
    job: str
    steps: list[StepPoint]
    bars: list[Bar]
    marks: list[Mark]
    redone: list[Redone]
    spend: list[tuple[float, float]]  # (epoch, cumulative USD) of the priced instances
    budget_usd: float | None
    unpriced: int = 0  # instances without a price: the spend leaves them out (a floor)

    @property
    def start(self) -> float:
        times = [b.start for b in self.bars] + [p.at for p in self.steps] + [m.at for m in self.marks]
        return min(times, default=0.0)

    @property
    def last_step(self) -> int | None:
        return max((p.step for p in self.steps), default=None)

    @property
    def spent(self) -> float:
        return max((usd for _, usd in self.spend), default=0.0)


def step_points(events: Iterable[Mapping[str, Any]], lives: Sequence[InstanceLife]) -> list[StepPoint]:
    points = [StepPoint(float(e["epoch"]), int(e["step"])) for e in events
              if e.get("kind") in STEP_EVENTS and isinstance(e.get("step"), int) and e.get("published", True)]
    points += [StepPoint(life.last_seen, step) for life in lives if (step := life.reached_step) is not None]
    return sorted(points, key=lambda p: (p.at, p.step))


def marks_of(events: Iterable[Mapping[str, Any]], losses: Losses) -> list[Mark]:
    """One mark per lost instance and per pause and resume; a pause's stops are the pause's mark alone."""
    marks = [Mark(loss.at, "interruption" if loss.kind is LossKind.NOTICE else "power-off",
                  f"{loss.instance}: {loss.reason}", loss.instance) for loss in losses.lost]
    marks += [Mark(change.at, change.kind, change.kind) for change in user_events(events)]
    return sorted(marks, key=lambda m: m.at)


def bars_of(lives: Sequence[InstanceLife], events: Sequence[Mapping[str, Any]]) -> list[Bar]:
    """Each instance from its launch to its end as recorded: its clean stop, else its last sign of life (the last
    heartbeat of one still running, or of one that lost power). Not its billed span, which runs on to EC2's 60 s
    minimum, nor to now."""
    def end(life: InstanceLife) -> float:
        return life.stopped_at if life.stopped_at is not None else last_sign_of_life(life, events)

    return [Bar(life.instance, life.instance_type, life.market, life.launched_at, max(end(life), life.launched_at))
            for life in sorted(lives, key=lambda life: life.launched_at)]


def redone_spans(events: Iterable[Mapping[str, Any]], points: Sequence[StepPoint]) -> list[Redone]:
    spans = []
    for resume in (e for e in events if e.get("kind") == EventKind.RESUME and isinstance(e.get("step"), int)):
        at, step = float(resume["epoch"]), int(resume["step"])
        lost = max((p.step for p in points if p.at < at), default=step)
        if lost <= step:
            continue
        back = next((p.at for p in points if p.at > at and p.step >= lost), points[-1].at if points else at)
        spans.append(Redone(at, max(back, at), lost - step))
    return spans


def spend_curve(costs: Sequence[InstanceCost]) -> list[tuple[float, float]]:
    """Cumulative USD at every instance's start and end, each instance's cost spread over its span."""
    priced = [c for c in costs if c.cost_usd is not None]
    times = sorted({t for c in priced for t in (c.start, c.end)})

    def spent(at: float) -> float:
        return sum(float(c.cost_usd or 0.0) * min(1.0, max(0.0, (at - c.start) / max(c.end - c.start, 1e-9)))
                   for c in priced)

    return [(t, spent(t)) for t in times]


def story_of(job: str, events: Sequence[Mapping[str, Any]], lives: Sequence[InstanceLife],
             costs: Sequence[InstanceCost], status: Mapping[str, Any], losses: Losses) -> JobStory:
    points = step_points(events, lives)
    budget = status.get("budget_usd")
    return JobStory(
        job=job, steps=points, bars=bars_of(lives, events), marks=marks_of(events, losses),
        redone=redone_spans(events, points), spend=spend_curve(costs),
        budget_usd=float(budget) if isinstance(budget, int | float) and budget > 0 else None,
        unpriced=sum(c.cost_usd is None for c in costs))
