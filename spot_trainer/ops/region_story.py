"""A job of several regions as its buckets tell it, shaped for a picture: where the regions controller had the
job over time (a stay per region between its moves), when instances actually ran in each region, the steps
trained in each stay, each move with its reason, and each start that restored the job's newest step from
another region's bucket, with the bytes that crossed.

Every figure comes from a record: the moves from the controller's `region` events, the steps from each
region's own events and instance records, the bytes from the `region_restore` events. What no record says
stays None (drawn as unknown), never filled in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..costs.instance_records import InstanceLife
from ..storage.record_kinds import EventKind
from .job_story import Bar, StepPoint, bars_of, step_points

Event = Mapping[str, Any]


@dataclass(frozen=True)
class RegionMove:
    at: float
    source: str
    target: str
    reason: str


@dataclass(frozen=True)
class Crossing:
    """A start in `region` that restored `step` from `source`'s bucket."""

    at: float
    region: str
    source: str
    step: int | None
    bytes: int | None


@dataclass(frozen=True)
class Stay:
    """The job in one region from one move to the next: the steps it trained there, as far as measured."""

    region: str
    start: float
    end: float
    from_step: int | None  # where training there began (None: no record says)
    to_step: int | None  # the highest step reached there (None: none reached)


@dataclass(frozen=True)
class RegionsStory:
    regions: tuple[str, ...]  # the job file's order, home first
    stays: list[Stay]
    ran: dict[str, list[Bar]]  # each region's instances, from its own bucket
    moves: list[RegionMove]
    crossings: list[Crossing]
    unread: tuple[str, ...] = ()  # regions whose bucket no record names: nothing of theirs is drawn

    @property
    def start(self) -> float:
        times = [s.start for s in self.stays] + [m.at for m in self.moves]
        return min(times, default=0.0)

    @property
    def end(self) -> float:
        times = [s.end for s in self.stays] + [m.at for m in self.moves]
        return max(times, default=0.0)


@dataclass(frozen=True)
class RegionRecords:
    """One region's records, read from its own bucket."""

    events: Sequence[Event]
    lives: Sequence[InstanceLife]


def moves_of(events: Sequence[Event]) -> list[RegionMove]:
    return sorted((RegionMove(float(e["epoch"]), str(e.get("from", "?")), str(e.get("to", "?")),
                              str(e.get("reason") or "no reason recorded"))
                   for e in events if e.get("kind") == EventKind.REGION and isinstance(e.get("epoch"), int | float)),
                  key=lambda move: move.at)


def crossings_of(region: str, events: Sequence[Event]) -> list[Crossing]:
    return [Crossing(float(e["epoch"]), region, str(e.get("region") or "?"),
                     e["step"] if isinstance(e.get("step"), int) else None,
                     e["bytes"] if isinstance(e.get("bytes"), int) else None)
            for e in events if e.get("kind") == EventKind.REGION_RESTORE and isinstance(e.get("epoch"), int | float)]


def stays_of(home: str, moves: Sequence[RegionMove], span: tuple[float, float],
             points: Mapping[str, Sequence[StepPoint]], resumes: Mapping[str, Sequence[StepPoint]]) -> list[Stay]:
    """The active region from the first record to the last: home until the first move, then each move's target."""
    first, last = span
    bounds = [(moves[0].source if moves else home, first)] + [(m.target, m.at) for m in moves]
    every = [p for region in points.values() for p in region]
    stays = []
    for index, (region, start) in enumerate(bounds):
        end = bounds[index + 1][1] if index + 1 < len(bounds) else last
        if end <= start and index + 1 < len(bounds):
            continue  # left before anything was recorded there
        here = [p.step for p in points.get(region, ()) if start <= p.at <= end]
        began = [p.step for p in resumes.get(region, ()) if start <= p.at <= end]
        fresh = bool(here) and not any(p.at < start for p in every)  # nothing to resume from: it began at 0
        stays.append(Stay(region, start, max(end, start), began[0] if began else 0 if fresh else None,
                          max(here, default=None)))
    return stays


def regions_story(home_first: Sequence[str], records: Mapping[str, RegionRecords]) -> RegionsStory:
    """The regions' story from each region's records (`records` holds the regions whose bucket was read)."""
    every = [e for each in records.values() for e in each.events]
    points = {region: step_points(each.events, each.lives) for region, each in records.items()}
    resumes = {region: [StepPoint(float(e["epoch"]), e["step"]) for e in each.events
                        if e.get("kind") == EventKind.RESUME and isinstance(e.get("step"), int)
                        and isinstance(e.get("epoch"), int | float)]
               for region, each in records.items()}
    ran = {region: bars_of(each.lives, every) for region, each in records.items()}
    times = ([p.at for each in points.values() for p in each] + [b.end for each in ran.values() for b in each]
             + [b.start for each in ran.values() for b in each]
             + [float(e["epoch"]) for e in every if isinstance(e.get("epoch"), int | float)])
    moves = moves_of(every)
    stays = stays_of(home_first[0], moves, (min(times), max(times)), points, resumes) if times else []
    crossings = sorted((c for region, each in records.items() for c in crossings_of(region, each.events)),
                       key=lambda crossing: crossing.at)
    return RegionsStory(tuple(home_first), stays, ran, moves, crossings,
                        tuple(region for region in home_first if region not in records))
