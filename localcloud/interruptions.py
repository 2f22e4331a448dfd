"""When and how the local spot cloud takes an instance away.

Two ways to say when: a schedule (N interruptions spread evenly over the steps still to do,
counted from where the instance in charge resumed, so each replacement trains a while first; for a
command whose total steps are unknown, one every `spacing_seconds` of an instance's training) or a
rate (a Poisson process, as spot reclaims arrive, with exponential gaps of mean 3600/rate seconds).
Each interruption is either announced (spot/instance-action, plus a rebalance recommendation first
when asked, then the notice window, then power off) or a hard kill (power off without notice).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

ANNOUNCED = "announced"
HARD = "hard-kill"


class PlanError(ValueError):
    """Contradictory or out-of-range interruption settings; the message names the flag."""


@dataclass(frozen=True)
class InterruptionPlan:
    count: int = 0  # scheduled announced interruptions (after the `hard_kills` without notice)
    hard_kills: int = 0
    rate_per_hour: float | None = None  # Poisson arrivals instead of a schedule
    notice_seconds: float = 8.0  # AWS gives 120 s; scaled down for a local run
    rebalance: bool = False  # a rebalance recommendation comes with each notice
    early_replacement: int = 0  # how many announced interruptions get their replacement at notice time
    hard_kill_fraction: float = 0.0  # with a rate: share of arrivals that come without notice
    seed: int = 0
    spacing_seconds: float = 20.0  # a schedule without known total steps: training time before each

    def check(self) -> None:
        if self.count < 0 or self.hard_kills < 0:
            raise PlanError("--interruptions and --hard-kill must be 0 or more")
        if self.rate_per_hour is not None:
            if self.rate_per_hour <= 0:
                raise PlanError(f"--rate {self.rate_per_hour} must be a positive number per hour")
            if self.count or self.hard_kills:
                raise PlanError("--rate cannot be combined with --interruptions or --hard-kill")
        if self.early_replacement < 0:
            raise PlanError(f"--early-replacement {self.early_replacement} must be 0 or more")
        if self.notice_seconds < 0:
            raise PlanError(f"--notice-seconds {self.notice_seconds} must be 0 or more")
        if self.spacing_seconds <= 0:
            raise PlanError(f"--interrupt-every {self.spacing_seconds} must be a positive number of seconds")
        if not 0 <= self.hard_kill_fraction <= 1:
            raise PlanError(f"hard kill fraction {self.hard_kill_fraction} must lie in [0, 1]")


@dataclass
class Interruption:
    """One interruption as it happened, filled in as the run goes on."""

    kind: str
    instance: str
    at: float  # wall-clock time of the notice (or of the kill, without notice)
    step_at_notice: int | None = None
    reached_step: int | None = None  # highest step the instance completed
    resumed_step: int | None = None  # step its successor resumed from (None: started fresh)
    killed_at: float | None = None
    uploaded_step: int | None = None  # latest.json when the power went off

    @property
    def lost_steps(self) -> int | None:
        if self.reached_step is None:
            return None
        return max(0, self.reached_step - (self.resumed_step or 0))


@dataclass
class Injector:
    """Decides, on each tick of the player loop, whether to interrupt now and with what kind."""

    plan: InterruptionPlan
    total_steps: int | None
    _kinds: list[str] = field(default_factory=list)
    _fired: int = 0
    _last_step: int = 0
    _next_at: float | None = None
    _random: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self._kinds = [HARD] * self.plan.hard_kills + [ANNOUNCED] * self.plan.count
        self._random = random.Random(self.plan.seed)

    def step_threshold(self, start: int) -> float:
        """The next scheduled interruption fires once an instance that resumed at `start` passes this step:
        the interruptions left share the steps left, counted from that start or the last interruption."""
        assert self.total_steps is not None
        remaining = len(self._kinds) - self._fired
        base = max(start, self._last_step)
        return base + (self.total_steps - base) / (remaining + 1)

    def due(self, now: float, step: int | None, start: int = 0, training_since: float | None = None) -> str | None:
        """The kind of interruption to inject now, or None. `training_since`: when the instance in
        charge showed its first progress (places a schedule in time when the total steps are unknown)."""
        if self.plan.rate_per_hour is not None:
            if self._next_at is None:
                self._next_at = now + self._gap()
            if now < self._next_at:
                return None
            self._next_at = now + self._gap()
            self._fired += 1
            return HARD if self._random.random() < self.plan.hard_kill_fraction else ANNOUNCED
        if self._fired >= len(self._kinds):
            return None
        if self.total_steps is None:
            if training_since is None or now - training_since < self.plan.spacing_seconds:
                return None
        elif step is None or step < self.step_threshold(start):
            return None
        self._fired, self._last_step = self._fired + 1, step or 0
        return self._kinds[self._fired - 1]

    def early_replacement(self, announced_so_far: int) -> bool:
        """Whether this announced interruption (1-based count) gets its replacement at notice time."""
        return announced_so_far <= self.plan.early_replacement

    def _gap(self) -> float:
        assert self.plan.rate_per_hour is not None
        return self._random.expovariate(self.plan.rate_per_hour / 3600.0)
