"""The move rule: where the job should run now, as a decision with a one-line reason.

The active region is left when it has run no instance for `region_wait`, or has failed
`capacity_failures` launches in a row for capacity. A quota or configuration failure is no capacity
shortage: it never hastens a move (waiting does not help; the reason says what would). The target is
the best-scored region at or above `min_score`; ties go to the region holding the newest checkpoint
(no cross-region restore), then to the lower spot price, then to the job file's order. A price counts only
where every tied region's is known: one unknown price leaves the tie to the job file's order. Without scores
(AWS's configuration limit), the regions not yet tried are taken in that same order. Moves are
bounded (at most `max_moves_per_day` in any 24 hours) and back off: moves with no instance run in between
wait `backoff_seconds`, then twice that, and so on; an instance that runs ends the backoff. A sweep that
finds no capacity in any region (no other region scored high enough or, without scores, every region
tried) hands the job over to the on-demand rules of spot_trainer/capacity/policy.py in the region it is in;
without scores, a region left `retry_after_seconds` ago may be tried again, as capacity comes back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ..policy import format_duration
from .launch_failures import LaunchFailure
from .observations import RegionObservation

DAY_SECONDS = 86400.0


class Action(StrEnum):
    STAY = "stay"
    MOVE = "move"
    ON_DEMAND = "on-demand"  # no spot capacity anywhere: the on-demand rules decide, where the job is


@dataclass(frozen=True)
class MoveRules:
    region_wait: float  # seconds without a running instance before the active region is left
    capacity_failures: int = 3  # K launches failed for capacity in a row leave it sooner
    min_score: int = 6  # a target's placement score is at least this (1-10)
    max_moves_per_day: int = 24  # then the on-demand rules, until a move falls out of the 24 hours
    backoff_seconds: float = 300.0  # between two moves with no instance run between them; doubles after each
    retry_after_seconds: float = 3600.0  # without scores, a region left this long ago may be tried again

    def __post_init__(self) -> None:
        if self.region_wait <= 0:
            raise ValueError(f"region_wait must be longer than zero, not {self.region_wait:g} s")
        if self.capacity_failures < 1 or self.max_moves_per_day < 1:
            raise ValueError("capacity_failures and max_moves_per_day must be at least 1, not "
                             f"{self.capacity_failures} and {self.max_moves_per_day}")
        if not 1 <= self.min_score <= 10:
            raise ValueError(f"a placement score is 1 to 10: min_score {self.min_score} is outside it")

    def gap_after(self, moves_in_sweep: int) -> float:
        """The least time before the next move, after `moves_in_sweep` moves with no instance run since."""
        return 0.0 if moves_in_sweep == 0 else self.backoff_seconds * float(2 ** (moves_in_sweep - 1))


@dataclass(frozen=True)
class Move:
    at: float
    source: str
    target: str
    reason: str


@dataclass(frozen=True)
class JobPlace:
    """Where the job is: its regions (home first), the active one, its moves so far, when an instance
    last ran in any region (a sweep starts there), and the region of its newest checkpoint."""

    regions: tuple[str, ...]
    active: str
    moves: tuple[Move, ...] = ()
    last_running_at: float | None = None
    checkpoint_region: str | None = None

    def moves_in_sweep(self) -> list[Move]:
        """The moves made since an instance last ran."""
        since = self.last_running_at
        return [move for move in self.moves if since is None or move.at >= since]

    def tried(self, now: float, retry_after: float) -> set[str]:
        """The active region, and those this sweep left less than `retry_after` ago."""
        return {self.active} | {move.source for move in self.moves_in_sweep() if now - move.at < retry_after}


@dataclass(frozen=True)
class RegionDecision:
    action: Action
    region: str  # where the job runs once the decision is applied
    reason: str  # one line, for status, the report and the notification


def decide(place: JobPlace, seen: Mapping[str, RegionObservation], rules: MoveRules, now: float) -> RegionDecision:
    """Stay, move, or hand over to the on-demand rules; `seen` holds every listed region's observation."""
    active = seen[place.active]
    if active.running:
        return RegionDecision(Action.STAY, place.active, f"{active.running} instance(s) running in {place.active}")
    trigger = _reason_to_leave(active, rules, now)
    if trigger is None:
        return RegionDecision(Action.STAY, place.active, _waiting_reason(active, rules, now))
    today = sum(1 for move in place.moves if now - move.at < DAY_SECONDS)
    if today >= rules.max_moves_per_day:
        return RegionDecision(Action.ON_DEMAND, place.active, f"{trigger}; {today} moves in 24 hours, the most "
                                                              "allowed: on-demand rules apply")
    sweep = place.moves_in_sweep()
    if sweep and now - sweep[-1].at < rules.gap_after(len(sweep)):
        wait = rules.gap_after(len(sweep)) - (now - sweep[-1].at)
        return RegionDecision(Action.STAY, place.active,
                              f"{trigger}; moves back off: the next one {_minutes(wait)} from now at the earliest")
    return _choose_target(place, seen, rules, trigger, now)


def _reason_to_leave(active: RegionObservation, rules: MoveRules, now: float) -> str | None:
    failures = active.failures
    capacity = failures.count(LaunchFailure.CAPACITY)
    if capacity >= rules.capacity_failures:
        return f"{capacity} launches in {active.region} failed for capacity ({failures.last_code})"
    idle = _idle_seconds(active, now)
    if idle >= rules.region_wait:
        cause = _not_capacity(active)
        wait = _minutes(rules.region_wait)
        waited = f"no instance has run in {active.region} for {_minutes(idle)} (region_wait {wait})"
        return waited + (f"; {cause}" if cause else "")
    return None


def _waiting_reason(active: RegionObservation, rules: MoveRules, now: float) -> str:
    cause = _not_capacity(active)
    if cause:
        return cause
    capacity = active.failures.count(LaunchFailure.CAPACITY)
    return (f"waiting for spot capacity in {active.region}: {_minutes(_idle_seconds(active, now))} of region_wait "
            f"{_minutes(rules.region_wait)}, {capacity} of {rules.capacity_failures} capacity failures")


def _not_capacity(region: RegionObservation) -> str:
    """The line for a newest failure that waiting does not mend, or ''."""
    newest, code = region.failures.newest, region.failures.last_code
    if newest is LaunchFailure.QUOTA:
        return (f"launches in {region.region} fail on a quota ({code}), not for capacity: waiting does not help, "
                "a quota increase does")
    if newest is LaunchFailure.CONFIGURATION:
        return f"launches in {region.region} fail on the job's configuration, not for capacity: {code}"
    return ""


def _choose_target(place: JobPlace, seen: Mapping[str, RegionObservation], rules: MoveRules,
                   trigger: str, now: float) -> RegionDecision:
    # With scores, AWS's newest word on each region decides (a region left earlier may score high again);
    # without them, the regions this sweep has not tried, in turn.
    scored = any(seen[name].score is not None for name in place.regions)
    passed = {place.active} if scored else place.tried(now, rules.retry_after_seconds)
    eligible = [name for name in place.regions if name not in passed and _may_launch(seen[name])
                and (not scored or (seen[name].score or 0) >= rules.min_score)]
    if not eligible:
        return RegionDecision(Action.ON_DEMAND, place.active, f"{trigger}; {_no_capacity_anywhere(place, seen, rules)}")
    target, tied = _best(eligible, place, seen)
    why = _why_target(target, tied, place, seen)
    return RegionDecision(Action.MOVE, target, f"{trigger}; moving to {target} ({why})")


def _may_launch(region: RegionObservation) -> bool:
    """A region whose own group last failed on a quota or its configuration is no target."""
    return region.failures.newest in (None, LaunchFailure.CAPACITY)


def _standing(name: str, place: JobPlace, seen: Mapping[str, RegionObservation]) -> tuple[int, bool]:
    """What outranks a price: the score, then holding the newest checkpoint."""
    return -(seen[name].score or 0), name != place.checkpoint_region


def _best(eligible: Sequence[str], place: JobPlace, seen: Mapping[str, RegionObservation]) -> tuple[str, list[str]]:
    """The target and the regions tied with it before the price (the target first); `eligible` is in the job
    file's order, and min() keeps the first of equal prices."""
    top = min(_standing(name, place, seen) for name in eligible)
    tied = [name for name in eligible if _standing(name, place, seen) == top]
    priced = {name: price for name in tied if (price := seen[name].spot_price) is not None}
    if len(priced) == len(tied):
        target = min(priced, key=priced.__getitem__)
        return target, [target, *(name for name in tied if name != target)]
    return tied[0], tied


def _why_target(target: str, tied: Sequence[str], place: JobPlace, seen: Mapping[str, RegionObservation]) -> str:
    region = seen[target]
    parts = [f"placement score {region.score}" if region.score is not None else "not tried in this sweep"]
    unpriced = [name for name in tied if seen[name].spot_price is None]
    if target == place.checkpoint_region:
        parts.append("holds the newest checkpoint")
    elif len(tied) > 1 and unpriced:
        parts.append(f"tied with {', '.join(tied[1:])}; spot price unknown in {', '.join(unpriced)}, "
                     "so the job file's order decides")
    elif len(tied) > 1:
        parts.append(f"lowest spot price among the tied, ${region.spot_price:.3f}/h")
    return ", ".join(parts)


def _no_capacity_anywhere(place: JobPlace, seen: Mapping[str, RegionObservation], rules: MoveRules) -> str:
    scores = ", ".join(f"{name} {seen[name].score}" for name in place.regions if seen[name].score is not None)
    if scores:
        return (f"no other region scores {rules.min_score} or more ({scores}): no spot capacity anywhere, "
                "on-demand rules apply")
    return f"one sweep of all {len(place.regions)} regions found no spot capacity: on-demand rules apply"


def _idle_seconds(region: RegionObservation, now: float) -> float:
    return 0.0 if region.idle_since is None else max(0.0, now - region.idle_since)


def _minutes(seconds: float) -> str:
    """"15m", "4m10s", "20s": the job file's own way to write a duration."""
    return format_duration(seconds)
