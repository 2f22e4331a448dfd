"""The world of the regions simulation (benchmarks/region_moves.py): its settings, a job with its regions' spot
capacity and placement-score traces (seeded), a run's state minute by minute, and what one run comes to."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.capacity_traces import trace
from benchmarks.region_timing import MoveTime
from benchmarks.training_run import TrainingRun
from spot_trainer.capacity.regions.moves import Move

REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
SPOT_SHARE = {"us-east-1": (0.30, 0.40), "us-west-2": (0.28, 0.42), "eu-west-1": (0.33, 0.45)}
TYPES = ("g5.12xlarge", "g6.12xlarge", "g6e.12xlarge")


@dataclass(frozen=True)
class Settings:
    notice_minutes: int = 2  # AWS's spot interruption notice
    launch_retry_minutes: int = 1  # a group's failed launches (an assumption: AWS documents no cadence)
    launch_minutes: int = 2  # launch to user data (an assumption: AWS documents none)
    bootstrap_minutes: int = 1  # user data to a running agent (measured 15.4-16.1 s)
    checkpoint_minutes: int = 15
    margin_minutes: int = 30
    outage_hours: float = 3.0
    unavailability: tuple[float, float] = (0.2, 0.5)
    shared_unavailability: float = 0.05
    score_noise: float = 0.15
    compute_hours: tuple[float, float] = (6.0, 24.0)
    slack: tuple[float, float] = (1.3, 2.0)
    checkpoint_gb: tuple[float, float] = (10.0, 400.0)
    restore_gb_per_minute: float = 30.0  # 500 MB/s, in its own region or across
    transfer_per_gb: float = 0.02
    on_demand_per_hour: tuple[float, float] = (5.0, 33.0)
    region_wait_minutes: int = 15  # the job file's default (capacity.region_wait)
    capacity_failures: int = 3
    min_score: int = 6


@dataclass(frozen=True)
class Job:
    compute: int  # minutes of training = steps
    deadline: int  # minutes after the first start
    on_demand_per_minute: float
    checkpoint_gb: float
    spot_share: dict[str, float]
    available: dict[str, bytes]  # per region, per minute: spot capacity there (1) or not (0)
    scores: dict[str, bytes]  # per region, per minute: the placement score AWS would answer
    announced: bytes  # per minute: a reclaim then comes with a notice that saves the work

    def spot_at(self, region: str, minute: int) -> bool:
        trace = self.available[region]
        return minute >= len(trace) or bool(trace[minute])


@dataclass
class Run(TrainingRun):
    region: str = field(kw_only=True)  # the active region: where the group is set to run
    checkpoint_region: str | None = None
    idle_since: int = 0  # the minute the active region last had no instance, or became active
    failures: int = 0  # launches failed for capacity in the active region since its last launch
    last_running_at: int | None = None
    reclaim_at: int | None = None  # a spot instance given its notice ends at this minute
    lost_at: int | None = None  # the minute the active region stopped giving the job an instance
    due_at: int | None = None  # the minute the move rule's trigger first held since
    move_times: list[MoveTime] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)  # the move rule's own record
    region_changes: int = 0
    restores: int = 0
    on_demand_cost: float = 0.0
    transfer_gb: float = 0.0
    waiting: int = 0


@dataclass(frozen=True)
class Outcome:
    met: bool
    relative_cost: float
    waiting_hours: float
    cross_region_gb: float
    region_changes: int  # the group set to 0 in one region and N in another (a try, for price order)
    restores: int  # cross-region restores of the checkpoint
    on_demand_share: float
    spot_cost: float  # the parts of relative_cost
    on_demand_cost: float
    transfer_cost: float
    move_times: tuple[MoveTime, ...] = ()


Policy = Callable[[Job, Run, int, bool], None]  # (job, run, minute, reclaimed now): sets run.region / run.market


def noisy_scores(rng: random.Random, available: bytes, noise: float) -> bytes:
    """A score per minute: 6-10 where capacity is, 1-4 where not; wrong `noise` of the time, in 10-minute runs."""
    scores = bytearray(len(available))
    for start in range(0, len(available), 10):
        wrong = rng.random() < noise
        for minute in range(start, min(start + 10, len(available))):
            high = bool(available[minute]) != wrong
            scores[minute] = rng.randint(6, 10) if high else rng.randint(1, 4)
    return bytes(scores)


def make_job(rng: random.Random, settings: Settings) -> Job:
    compute = round(rng.uniform(*settings.compute_hours) * 60)
    deadline = round(compute * rng.uniform(*settings.slack))
    minutes = deadline * 4
    shared = trace(rng, minutes, settings.shared_unavailability, settings.outage_hours)
    available, scores = {}, {}
    for region in REGIONS:
        own = trace(rng, minutes, rng.uniform(*settings.unavailability), settings.outage_hours)
        available[region] = bytes(a & b for a, b in zip(own, shared, strict=True))
        scores[region] = noisy_scores(rng, available[region], settings.score_noise)
    return Job(compute, deadline, rng.uniform(*settings.on_demand_per_hour) / 60, rng.uniform(*settings.checkpoint_gb),
               {region: rng.uniform(*SPOT_SHARE[region]) for region in REGIONS}, available, scores,
               bytes(rng.random() < 0.5 for _ in range(minutes)))
