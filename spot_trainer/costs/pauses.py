"""When the job was paused, from its events: `spot-trainer pause` records `paused` before it scales the group to
zero, `spot-trainer resume` records `resumed` before it scales it back (spot_trainer/ops/pause.py).

While a pause is in effect every agent stops as on a notice (the group's termination hook says Terminated) and
records an `interruption` with the reason "scale-in (lifecycle Terminated)": that stop is the pause's, not a
lost instance's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..storage.record_kinds import EventKind

USER_EVENTS = (EventKind.PAUSED, EventKind.RESUMED)


@dataclass(frozen=True)
class UserEvent:
    kind: EventKind  # PAUSED or RESUMED
    at: float


def user_events(events: Iterable[Mapping[str, Any]]) -> list[UserEvent]:
    """Every pause and resume, in time order."""
    found = [UserEvent(EventKind(e["kind"]), float(e["epoch"])) for e in events
             if e.get("kind") in USER_EVENTS and isinstance(e.get("epoch"), int | float)]
    return sorted(found, key=lambda e: e.at)


def last_before(changes: Iterable[UserEvent], at: float) -> UserEvent | None:
    """The pause or resume in effect at `at` (recorded at or before it)."""
    return max((e for e in changes if e.at <= at), key=lambda e: e.at, default=None)


def paused_at(changes: Iterable[UserEvent], at: float) -> bool:
    newest = last_before(changes, at)
    return newest is not None and newest.kind == EventKind.PAUSED
