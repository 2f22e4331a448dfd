"""The deadline-aware market policy: uniform progress (Can't-Be-Late, NSDI'24) with a safety net.

The straight line runs from no steps at the job's first start to every step at the deadline less a
margin (boot, restore and safety kept in hand). Spot that runs is kept; when spot capacity is gone
and the job is behind the line by more than the margin, on-demand. A safety net overrides the line:
when the measured pace no longer finishes the remaining steps before deadline − margin, on-demand
regardless. Leaving on-demand needs the job within a margin of the line and a whole margin to spare
at the pace, so a job near the safety net does not pay a hand-over for every step it gains or loses.

Durations are integers with units d, h, m, s concatenated ("36h", "90m", "1d12h"); a deadline is
an ISO-8601 UTC timestamp ending in "Z" or such a duration counted from the job's first start.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

SPOT = "spot"
ON_DEMAND = "on-demand"

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:\d+[dhms])+")
_PART = re.compile(r"(\d+)([dhms])")
# ISO-8601's extended form only, in UTC: the one the console parameter's pattern also takes.
_UTC_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?Z")
# Behind the line by less than this share of the margin is a boot or a restore in progress, not a
# job falling behind: without it every (re)start would flip the job to on-demand. The margin is
# there to absorb such a delay, and the safety net still catches a pace that cannot make it.
BEHIND_TOLERANCE = 1.0
# Leaving on-demand takes being within this share of the margin of the line (negative: behind it) and
# a whole margin to spare at the measured pace. Going back to spot costs one hand-over, and spot that
# runs keeps the pace as well as on-demand; the safety net guards the deadline (P8: 100% met either way,
# 0.48 of the on-demand cost at -1 against 0.51 at +0.5, at 30% unavailability).
RETURN_LEAD = -1.0


def is_duration(text: str) -> bool:
    """A duration's form ("36h"), rather than a moment's ("2026-12-01T18:00:00Z")."""
    return _DURATION.fullmatch(text.strip()) is not None


def parse_duration(text: str) -> float:
    """Seconds in "36h", "90m", "2d", "1d12h", "45s"; ValueError naming the text otherwise."""
    stripped = text.strip()
    if not _DURATION.fullmatch(stripped):
        raise ValueError(f"duration {text!r} is not whole numbers with units d, h, m, s, such as 36h, 90m or 1d12h")
    seconds = sum(int(count) * _UNIT_SECONDS[unit] for count, unit in _PART.findall(stripped))
    if seconds <= 0:
        raise ValueError(f"duration {text!r} must be longer than zero")
    return float(seconds)


def parse_deadline(text: str, first_start: float) -> float:
    """Epoch of a UTC timestamp like 2026-12-01T18:00:00Z, or of a duration after `first_start`."""
    stripped = text.strip()
    if stripped[:1].isdigit() and "T" in stripped:
        return _parse_utc_timestamp(text)
    try:
        return first_start + parse_duration(stripped)
    except ValueError:
        raise ValueError(
            f"deadline {text!r} is neither a UTC timestamp like 2026-12-01T18:00:00Z nor a duration like 36h"
        ) from None


def _parse_utc_timestamp(text: str) -> float:
    stripped = text.strip()
    problem = f"deadline {text!r} is not a UTC timestamp like 2026-12-01T18:00:00Z"
    if not stripped.endswith("Z"):
        raise ValueError(problem + " (it must end in Z)")
    if not _UTC_TIMESTAMP.fullmatch(stripped):
        raise ValueError(problem)
    try:
        return datetime.fromisoformat(stripped).timestamp()
    except ValueError:  # a month 13, a 31 April
        raise ValueError(problem) from None


def format_duration(seconds: float) -> str:
    """"2h", "1h30m", "4m10s", "30s": a short human form that `parse_duration` reads back; to the
    second under an hour, to the minute above."""
    whole = round(abs(seconds))
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return (f"{minutes}m" if minutes else "") + (f"{rest}s" if rest or not minutes else "")
    minutes = round(whole / 60)
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    return "".join(parts)


@dataclass(frozen=True)
class DeadlinePlan:
    """When the job first started, when it must be done, its size, and the time kept in hand."""

    first_start: float
    deadline_at: float
    total_steps: int
    margin_seconds: float

    @classmethod
    def checked(cls, first_start: float, deadline_at: float, total_steps: int, margin_seconds: float) -> DeadlinePlan:
        """A plan whose line has a positive length; ValueError naming what is wrong otherwise."""
        if total_steps < 1:
            raise ValueError(f"total steps must be at least 1, not {total_steps}")
        if margin_seconds < 0:
            raise ValueError(f"the deadline margin must not be negative, not {margin_seconds:g} s")
        if deadline_at <= first_start + margin_seconds:
            gap = deadline_at - first_start
            where = f"{format_duration(gap)} {'after' if gap >= 0 else 'before'} it"
            raise ValueError(f"the deadline must fall more than the {format_duration(margin_seconds)} margin "
                             f"after the job's first start; it falls {where}")
        return cls(first_start, deadline_at, total_steps, margin_seconds)

    @property
    def budget_seconds(self) -> float:
        """The line's length: first start to deadline − margin."""
        return self.deadline_at - self.margin_seconds - self.first_start


@dataclass(frozen=True)
class Progress:
    """Where the job stands at `now`: steps done, and seconds a step takes (None until measured)."""

    now: float
    step: int
    seconds_per_step: float | None = None


@dataclass(frozen=True)
class Decision:
    market: str  # SPOT or ON_DEMAND
    reason: str  # one short human line


def line_steps(plan: DeadlinePlan, at: float) -> float:
    """Steps the straight line asks for by `at`: 0 at the first start, all at deadline − margin."""
    share = (at - plan.first_start) / plan.budget_seconds
    return plan.total_steps * min(1.0, max(0.0, share))


def ahead_seconds(plan: DeadlinePlan, progress: Progress) -> float:
    """How long until the line reaches the steps done; negative when the job is behind it."""
    reached_at = plan.first_start + plan.budget_seconds * progress.step / plan.total_steps
    return reached_at - progress.now


def pace_shortfall(plan: DeadlinePlan, progress: Progress) -> float | None:
    """Seconds by which the measured pace misses deadline − margin (negative: time to spare); None
    before the pace is known."""
    if progress.seconds_per_step is None:
        return None
    remaining = max(0, plan.total_steps - progress.step)
    return progress.now + remaining * progress.seconds_per_step + plan.margin_seconds - plan.deadline_at


def choose_market(plan: DeadlinePlan, progress: Progress, current: str, *, running: bool = True) -> Decision:
    """The market the job should run on now, given the one its group is set to now and whether an
    instance of it is training (`running`: an agent asks; the capacity watch asks while none is)."""
    if progress.step >= plan.total_steps:
        return Decision(current, f"all {plan.total_steps} steps done")
    shortfall = pace_shortfall(plan, progress)
    if shortfall is not None and shortfall >= 0:
        return Decision(ON_DEMAND, _late_reason(plan, progress))
    ahead = ahead_seconds(plan, progress)
    if current == ON_DEMAND:
        return _leave_on_demand(plan, ahead, shortfall)
    if not running and ahead < -BEHIND_TOLERANCE * plan.margin_seconds:
        # No spot capacity, and further behind than a restart explains: on-demand until caught up.
        behind = math.ceil(line_steps(plan, progress.now) - progress.step)
        return Decision(ON_DEMAND, f"no spot capacity and behind the straight line to the deadline by {behind} steps")
    # Spot that runs is as fast as on-demand: behind the line or not, only the safety net leaves it.
    return Decision(SPOT, _lead_reason(ahead))


def _leave_on_demand(plan: DeadlinePlan, ahead: float, shortfall: float | None) -> Decision:
    """Back to spot once within a restart of the line (RETURN_LEAD margins; negative: behind it) and a
    whole margin to spare at the measured pace. Trying costs nothing without capacity: AWS launches the
    spot instance first and keeps the on-demand one until it runs."""
    lead = RETURN_LEAD * plan.margin_seconds
    if ahead < lead:
        now = f"behind the line by {format_duration(-ahead)}" if ahead < 0 else f"ahead by {format_duration(ahead)}"
        return Decision(ON_DEMAND, f"{now}, staying on on-demand until within {format_duration(-lead)} of it")
    if shortfall is not None and shortfall > -plan.margin_seconds:
        return Decision(ON_DEMAND, f"only {format_duration(-shortfall)} to spare at the measured pace, staying "
                                   "on on-demand")
    where = f"ahead by {format_duration(ahead)}" if ahead >= 0 else f"within {format_duration(-ahead)} of the line"
    return Decision(SPOT, f"{where}, back to spot")


def _lead_reason(ahead: float) -> str:
    if ahead >= 60:
        return f"ahead of the straight line to the deadline by {format_duration(ahead)}"
    return "on the straight line to the deadline"


def _late_reason(plan: DeadlinePlan, progress: Progress) -> str:
    remaining = plan.total_steps - progress.step
    needed = remaining * (progress.seconds_per_step or 0.0)
    left = plan.deadline_at - plan.margin_seconds - progress.now
    return (f"the remaining {remaining} steps need {format_duration(needed)} at the measured pace, "
            f"{format_duration(max(0.0, left))} left before the deadline's margin")


def spot_wait_exceeded(waited_seconds: float, max_spot_wait: float | None) -> bool:
    """The no-capacity rule: no working spot instance for `max_spot_wait` → on-demand (None: never)."""
    return max_spot_wait is not None and waited_seconds >= max_spot_wait
