"""A job's life as its records in S3 tell it, shaped for a picture: the step over wall time, each instance's
span and market, interruptions, power-offs and pauses, the work redone after each, spend against the cap.

Steps come from the events that carry one (a published checkpoint, a resume, an interruption's save, the
end) and from each instance record's last step; work is redone from a resume below the highest step
reached before it until training is back there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..costs.instance_records import InstanceLife
from ..costs.job_cost import InstanceCost

STEP_EVENTS = ("checkpoint", "resume", "interruption", "done")
USER_EVENTS = ("paused", "resumed")  # spot-trainer pause / resume (trainer/ops/pause.py)
POWER_OFF = "last seen"  # InstanceCost.ended_by of an instance that never stopped cleanly


@dataclass(frozen=True)
class StepPoint:
    at: float
    step: int


@dataclass(frozen=True)
class Mark:
    at: float
    kind: str  # "interruption", "power-off", "paused", "resumed"
    label: str
    instance: str = ""  # the instance a power-off took


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
    spend: list[tuple[float, float]]  # (epoch, cumulative USD)
    budget_usd: float | None

    @property
    def start(self) -> float:
        times = [b.start for b in self.bars] + [p.at for p in self.steps] + [m.at for m in self.marks]
        return min(times, default=0.0)

    @property
    def last_step(self) -> int | None:
        return max((p.step for p in self.steps), default=None)


def step_points(events: Iterable[Mapping[str, Any]], lives: Sequence[InstanceLife]) -> list[StepPoint]:
    points = [StepPoint(float(e["epoch"]), int(e["step"])) for e in events
              if e.get("kind") in STEP_EVENTS and isinstance(e.get("step"), int) and e.get("published", True)]
    points += [StepPoint(life.last_seen, life.step) for life in lives if life.step is not None]
    return sorted(points, key=lambda p: (p.at, p.step))


def marks_of(events: Iterable[Mapping[str, Any]], costs: Sequence[InstanceCost]) -> list[Mark]:
    marks = [Mark(float(e["epoch"]), e["kind"], str(e.get("reason", e["kind"]))) for e in events
             if e.get("kind") in ("interruption", *USER_EVENTS)]
    marks += [Mark(c.end, "power-off", f"{c.instance} lost without a clean stop", c.instance)
              for c in costs if c.ended_by == POWER_OFF]
    return sorted(marks, key=lambda m: m.at)


def redone_spans(events: Iterable[Mapping[str, Any]], points: Sequence[StepPoint]) -> list[Redone]:
    spans = []
    for resume in (e for e in events if e.get("kind") == "resume" and isinstance(e.get("step"), int)):
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
             costs: Sequence[InstanceCost], status: Mapping[str, Any]) -> JobStory:
    points = step_points(events, lives)
    budget = status.get("budget_usd")
    return JobStory(
        job=job, steps=points,
        bars=[Bar(c.instance, c.instance_type, c.market, c.start, c.end) for c in sorted(costs, key=lambda c: c.start)],
        marks=marks_of(events, costs), redone=redone_spans(events, points), spend=list(spend_curve(costs)),
        budget_usd=float(budget) if isinstance(budget, int | float) and budget > 0 else None)
