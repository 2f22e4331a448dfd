"""Steps computed more than once: what interruptions cost in work, from the job's events.

Each agent's "start" opens a stretch of training on its instance at step 0, its "resume" moves that
stretch's first step to the checkpoint it restored, and every later step it reports (interruption,
done, failure, checkpoint events, and the step in its instance record) extends the stretch; an agent
that waits for the lease ("lease_wait") trains nothing, so its instance's stretch ended before. Stretches
that overlap in time are one world of several nodes training together, so they count once. Then

    computed = Σ over stretches (last step − first step)
    redone   = computed − the number of distinct steps the stretches cover

A power-off without notice reports nothing more: the steps it ran past its instance record's last
heartbeat are not seen, so `redone` is a lower bound by at most one heartbeat of steps per power-off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..storage.checkpoint_versions import is_version
from ..storage.record_kinds import EventKind
from .instance_records import InstanceLife


@dataclass(frozen=True)
class Stretch:
    instance: str
    started: float
    last_event: float  # time of its agent's last event: when the stretch is known to have trained
    first_step: int
    last_step: int


@dataclass(frozen=True)
class Work:
    computed: int  # steps computed, redone ones included
    redone: int  # steps computed again after an interruption


def training_stretches(events: Iterable[Mapping[str, Any]], lives: Sequence[InstanceLife] = ()) -> list[Stretch]:
    """One stretch per agent start, in start order, with the steps its events and record show."""
    stretches: list[Stretch] = []
    current: dict[str, int] = {}  # instance → index of its open stretch
    timed = sorted((e for e in events if _number(e.get("epoch")) is not None), key=lambda e: float(e["epoch"]))
    for event in timed:
        instance, at, step = str(event.get("instance", "")), float(event["epoch"]), _step(event.get("step"))
        if event.get("kind") == EventKind.START:
            current[instance] = len(stretches)
            stretches.append(Stretch(instance, at, at, 0, 0))
            continue
        if event.get("kind") == EventKind.LEASE_WAIT:
            current.pop(instance, None)  # a standby trains nothing: its instance's earlier agent has stopped
            continue
        if instance not in current or event.get("kind") == EventKind.ROUND_RESUME:
            continue  # a standby's or an unknown agent's event, or a step fetched (not trained) for a round
        index = current[instance]
        stretch = replace(stretches[index], last_event=at)
        if event.get("kind") == EventKind.RESUME and step is not None:
            stretch = replace(stretch, first_step=step, last_step=max(step, stretch.last_step))
        elif step is not None:
            stretch = replace(stretch, last_step=max(step, stretch.last_step))
        stretches[index] = stretch
    return _with_record_steps(stretches, lives)


def _with_record_steps(stretches: list[Stretch], lives: Sequence[InstanceLife]) -> list[Stretch]:
    """An instance's record holds the step it last saw: its newest stretch begun by then reached it."""
    result = list(stretches)
    for life in lives:
        if life.step is None:
            continue
        mine = [i for i, s in enumerate(result) if s.instance == life.instance and s.started <= life.last_seen]
        if mine:
            result[mine[-1]] = replace(result[mine[-1]], last_step=max(result[mine[-1]].last_step, life.step))
    return result


def one_per_world(stretches: Sequence[Stretch]) -> list[Stretch]:
    """Merge stretches that overlap in time (the nodes of one distributed round) into one."""
    merged: list[Stretch] = []
    for stretch in sorted(stretches, key=lambda s: s.started):
        if merged and stretch.started < merged[-1].last_event:
            last = merged[-1]
            merged[-1] = replace(last, last_event=max(last.last_event, stretch.last_event),
                                 first_step=min(last.first_step, stretch.first_step),
                                 last_step=max(last.last_step, stretch.last_step))
        else:
            merged.append(stretch)
    return merged


def work_done(stretches: Sequence[Stretch]) -> Work:
    worlds = one_per_world(stretches)
    computed = sum(max(0, s.last_step - s.first_step) for s in worlds)
    return Work(computed=computed, redone=computed - covered(worlds))


def covered(stretches: Iterable[Stretch]) -> int:
    """How many distinct steps the stretches' [first, last) ranges cover together."""
    total, reach = 0, None
    for first, last in sorted((s.first_step, s.last_step) for s in stretches if s.last_step > s.first_step):
        if reach is None or first >= reach:
            total, reach = total + last - first, last
        elif last > reach:
            total, reach = total + last - reach, last
    return total


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _step(value: Any) -> int | None:
    """A step an event names; a version (a checkpoint that states no step) counts no steps."""
    whole = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if whole and not is_version(value) else None
