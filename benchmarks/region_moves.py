"""Regions: where a job that lists several regions waits less for spot capacity, and what moving costs.

300 simulated jobs (seeded, reproducible), each over three regions (us-east-1 home, us-west-2,
eu-west-1) with their own spot capacity traces: available and unavailable periods alternate,
exponential lengths with a mean outage of --outage-hours and each region out --unavailability LOW-HIGH
of the time (GPU-like scarcity); on top, a shared scarcity takes every region out at once
--shared-unavailability of the time (outages are correlated in time within a region, and sometimes
across them). Each job has a compute time, a deadline at 1.3-2.0x that after its first start, an
on-demand price, per-region spot prices (a share of on-demand) and a checkpoint of --checkpoint-gb.
Time runs in one-minute ticks, at AWS's times (benchmarks/region_timing.py, each with its source): a
(re)start costs its launch, its bootstrap and the checkpoint's restore, and a restore from another
region's bucket costs --transfer-per-gb per GB (inter-region, US pairs). Losing capacity gives a
running spot instance its 2-minute notice; half the time the notice saves the work, else the job goes
back to the last checkpoint (every 15 min). A group without capacity reports a failed launch each
--launch-retry-minutes.
A placement score is AWS's recommendation only: here a noisy view of the trace (wrong --score-noise
of the time), read through the job's ScoreCache, so at most every 10 minutes. Side by side, on the
same traces:

  single_region         the home region only, with today's on-demand rule (uniform progress, P8)
  price_order_failover  SkyPilot's default (EAGER_NEXT_REGION): start in the cheapest region; on a
                        reclaim or a failed launch block that region and go to the next cheapest;
                        all blocked: start over; spot only, as SkyPilot's managed jobs
  price_order_failover_deadline_rule
                        the same, and once a round of every region found no capacity, today's
                        on-demand rule in the region it is in (what meeting deadlines costs failover)
  placement_score       spot_trainer.capacity.regions.moves.decide each minute (the move rule), and
                        today's on-demand rule in the region the job is in

A group switched back to spot keeps its on-demand instance until a spot one can launch in its
region (AWS launches the replacement first, trainer/capacity/market.py; P8 plays it the same way).

Per policy: hours waiting for capacity (no instance), cost relative to running the whole job
on-demand (instances plus cross-region transfer) and its parts (spot, on-demand, transfer), the same
cost summed over all jobs per job that met its deadline, cross-region GB and moves, deadlines met, and
for each move the minutes from capacity lost in the region left to the first step in the new one,
against region_wait + 3 min.
Target: placement_score waits less than single_region and price_order_failover and costs less than
price_order_failover.

    python benchmarks/region_moves.py [--jobs 300] [--seed 14] [--unavailability 0.2 0.5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spot_trainer.capacity.policy import ON_DEMAND, SPOT, DeadlinePlan, Progress, choose_market
from spot_trainer.capacity.regions.launch_failures import LaunchFailure
from spot_trainer.capacity.regions.moves import Action, JobPlace, Move, MoveRules, decide
from spot_trainer.capacity.regions.observations import LaunchFailures, RegionObservation
from spot_trainer.capacity.regions.placement_scores import ScoreCache, ScoreRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.region_timing import MoveTime, move_times_summary, start_minutes  # noqa: E402

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
class Run:
    region: str
    market: str = SPOT
    instance: str | None = None
    booting: int = 0
    step: int = 0
    saved: int = 0
    since_save: int = 0
    trained: bool = False
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
    cost: float = 0.0
    on_demand_cost: float = 0.0
    transfer_gb: float = 0.0
    waiting: int = 0
    minutes: int = 0
    on_demand_minutes: int = 0


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


def trace(rng: random.Random, minutes: int, unavailability: float, outage_hours: float) -> bytearray:
    """Alternating available/unavailable periods, exponential lengths, `unavailability` of the time out."""
    out_mean = outage_hours * 60
    up_mean = out_mean * (1 - unavailability) / unavailability
    available = bytearray(minutes)
    minute, up = 0, rng.random() >= unavailability
    while minute < minutes:
        length = max(1, round(rng.expovariate(1 / (up_mean if up else out_mean))))
        if up:
            available[minute:minute + length] = b"\x01" * min(length, minutes - minute)
        minute, up = minute + length, not up
    return available


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


def on_demand_rule(job: Job, run: Run, minute: int, settings: Settings, *, running: bool | None = None) -> str:
    """Today's market rule in the region the job is in (trainer/capacity/policy.py, as P8's uniform_progress)."""
    plan = DeadlinePlan.checked(0.0, job.deadline * 60.0, job.compute, settings.margin_minutes * 60.0)
    progress = Progress(minute * 60.0, run.step, 60.0 if run.trained else None)
    running = run.instance is not None if running is None else running
    return choose_market(plan, progress, run.market, running=running).market


def single_region(settings: Settings) -> Policy:
    def policy(job: Job, run: Run, minute: int, reclaimed: bool) -> None:
        run.market = on_demand_rule(job, run, minute, settings)
    return policy


def price_order_failover(job: Job, on_round: Callable[[], None] = lambda: None) -> Policy:
    """`on_round`: called when every region has been blocked, before starting over."""
    order = sorted(REGIONS, key=lambda region: job.spot_share[region])
    blocked: set[str] = set()

    def policy(job: Job, run: Run, minute: int, reclaimed: bool) -> None:
        if run.instance is not None and not reclaimed:
            blocked.clear()
            return
        if not reclaimed and job.spot_at(run.region, minute):
            return  # the launch here succeeds
        blocked.add(run.region)
        if blocked >= set(REGIONS):
            blocked.clear()
            on_round()
        run.region = next(region for region in order if region not in blocked)
    return policy


class TraceScores:
    """GetSpotPlacementScores' paginator, answering from the job's score traces at `minute`."""

    def __init__(self, job: Job) -> None:
        self.job, self.minute = job, 0

    def get_paginator(self, operation_name: str) -> TraceScores:
        return self

    def paginate(self, **arguments: Any) -> list[dict[str, Any]]:
        at = min(self.minute, len(self.job.scores[REGIONS[0]]) - 1)
        return [{"SpotPlacementScores": [{"Region": region, "Score": self.job.scores[region][at]}
                                         for region in arguments["RegionNames"]]}]


def price_order_failover_deadline_rule(job: Job, settings: Settings) -> Policy:
    """Price-order failover until a round of every region finds no capacity; then today's on-demand rule."""
    swept = [False]
    failover = price_order_failover(job, on_round=lambda: swept.__setitem__(0, True))

    def policy(job: Job, run: Run, minute: int, reclaimed: bool) -> None:
        if run.instance is not None and not reclaimed:
            swept[0] = False
        if run.market == SPOT:
            failover(job, run, minute, reclaimed)
        run.market = on_demand_rule(job, run, minute, settings, running=run.instance is not None or not swept[0])
    return policy


def placement_score(job: Job, settings: Settings, *, hand_over: bool = True) -> Policy:
    rules = MoveRules(region_wait=settings.region_wait_minutes * 60.0, capacity_failures=settings.capacity_failures,
                      min_score=settings.min_score)
    client, cache = TraceScores(job), ScoreCache(ScoreRequest.for_job(TYPES, 1, REGIONS))

    def policy(job: Job, run: Run, minute: int, reclaimed: bool) -> None:
        swept = False  # a sweep found no spot capacity anywhere: today's on-demand rule decides in full
        if run.instance is None:
            client.minute = minute
            if run.due_at is None and (run.failures >= rules.capacity_failures
                                       or minute - run.idle_since >= settings.region_wait_minutes):
                run.due_at = minute  # the timing's record only: decide() below applies the rule itself
            scores = cache.current(client, minute * 60.0) or {}
            place = JobPlace(REGIONS, run.region, tuple(run.moves),
                             None if run.last_running_at is None else run.last_running_at * 60.0,
                             run.checkpoint_region)
            decision = decide(place, observations(job, run, scores), rules, minute * 60.0)
            if decision.action is Action.MOVE:
                run.moves.append(Move(minute * 60.0, run.region, decision.region, decision.reason))
                run.region, run.failures, run.idle_since = decision.region, 0, minute
            swept = decision.action is Action.ON_DEMAND
        # Before a sweep has failed, only the rule's safety net (the pace misses the deadline) leaves spot.
        if hand_over:
            run.market = on_demand_rule(job, run, minute, settings, running=run.instance is not None or not swept)
    return policy


def observations(job: Job, run: Run, scores: dict[str, int]) -> dict[str, RegionObservation]:
    seen = {region: RegionObservation(region, score=scores.get(region), spot_price=job.spot_share[region])
            for region in REGIONS}
    seen[run.region] = RegionObservation(
        run.region, running=int(run.instance is not None), idle_since=run.idle_since * 60.0,
        failures=LaunchFailures((LaunchFailure.CAPACITY,) * min(run.failures, 10)), score=scores.get(run.region),
        spot_price=job.spot_share[run.region])
    return seen


def stop(run: Run, minute: int) -> None:
    """The instance ends: a stop the job asks for saves first (not while booting, nor after a notice, which
    saved or lost the work itself); a reclaim keeps what its notice saved."""
    if not run.booting and run.reclaim_at is None:
        run.saved = run.step
    run.step, run.instance, run.idle_since, run.reclaim_at = run.saved, None, minute, None


def notice(job: Job, run: Run, minute: int, settings: Settings) -> None:
    """Spot capacity lost under a running spot instance: its notice, then its end `notice_minutes` later."""
    run.reclaim_at, run.lost_at = minute + settings.notice_minutes, minute
    if job.announced[min(minute, len(job.announced) - 1)] and not run.booting:
        run.saved, run.checkpoint_region = run.step, run.region  # the agent saves, then trains no more


def launch(job: Job, run: Run, minute: int, settings: Settings) -> None:
    """An instance starts in the active region; a checkpoint in another region's bucket is restored once."""
    restored = job.checkpoint_gb if run.saved > 0 else 0.0
    run.instance, run.since_save, run.failures, run.lost_at, run.due_at = run.market, 0, 0, None, None
    if run.move_times and run.move_times[-1].launched_at is None:
        run.move_times[-1].launched_at = minute
    run.booting = start_minutes(settings.launch_minutes, settings.bootstrap_minutes, restored,
                                settings.restore_gb_per_minute)
    if run.checkpoint_region is not None and run.checkpoint_region != run.region and run.saved > 0:
        run.transfer_gb += job.checkpoint_gb
        run.restores += 1
    run.checkpoint_region = run.region if run.saved > 0 or run.checkpoint_region is None else run.checkpoint_region


def tick(job: Job, run: Run, minute: int, settings: Settings) -> None:
    price = 1.0 if run.instance == ON_DEMAND else job.spot_share[run.region]
    run.cost += price * job.on_demand_per_minute
    run.on_demand_cost += (run.instance == ON_DEMAND) * job.on_demand_per_minute
    run.minutes += 1
    run.on_demand_minutes += run.instance == ON_DEMAND
    run.last_running_at = minute
    if run.booting:
        run.booting -= 1
        return
    if run.reclaim_at is not None:
        return  # under its notice: InService, but the agent has stopped the command
    if run.move_times and run.move_times[-1].first_step_at is None:
        run.move_times[-1].first_step_at = minute  # the first step in the region the job last moved to
    run.step += 1
    run.trained = True
    run.since_save += 1
    if run.since_save >= settings.checkpoint_minutes:
        run.saved, run.since_save, run.checkpoint_region = run.step, 0, run.region


def simulate(job: Job, policy: Policy, settings: Settings, home: str) -> Outcome:
    run, minute = Run(home), 0
    while run.step < job.compute:
        if run.instance == SPOT and run.reclaim_at is None and not job.spot_at(run.region, minute):
            notice(job, run, minute, settings)
        reclaimed = run.reclaim_at == minute
        if reclaimed:
            stop(run, minute)
        before = (run.region, run.market)
        policy(job, run, minute, reclaimed)
        if run.region != before[0]:
            moved(run, minute)
        spot = job.spot_at(run.region, minute)
        if run.instance is not None and (run.region != before[0] or (run.instance, run.market) == (SPOT, ON_DEMAND)):
            stop(run, minute)  # a move, or spot handing over to on-demand (which launches at once)
        if run.instance == ON_DEMAND and run.market == SPOT and spot:
            stop(run, minute)  # back on spot, and spot can launch here: the on-demand instance hands over
        if run.instance is None and (run.market == ON_DEMAND or spot):
            launch(job, run, minute, settings)
        if run.instance is None:
            run.waiting += 1
            run.lost_at = minute if run.lost_at is None else run.lost_at
            run.failures += run.market == SPOT and (minute - run.idle_since + 1) % settings.launch_retry_minutes == 0
        else:
            tick(job, run, minute, settings)
        minute += 1
    whole_on_demand = (job.compute + settings.launch_minutes + settings.bootstrap_minutes) * job.on_demand_per_minute
    transfer = run.transfer_gb * settings.transfer_per_gb
    return Outcome(minute <= job.deadline, (run.cost + transfer) / whole_on_demand, run.waiting / 60, run.transfer_gb,
                   run.region_changes, run.restores, run.on_demand_minutes / max(1, run.minutes),
                   (run.cost - run.on_demand_cost) / whole_on_demand, run.on_demand_cost / whole_on_demand,
                   transfer / whole_on_demand, tuple(run.move_times))


def moved(run: Run, minute: int) -> None:
    """A region change: timed from the minute capacity was lost in the region left, with the move rule's reason."""
    reason = run.moves[-1].reason if run.moves and run.moves[-1].at == minute * 60.0 else ""
    lost_at = minute if run.lost_at is None else run.lost_at
    run.move_times.append(MoveTime(lost_at, minute if run.due_at is None else run.due_at, minute, reason))
    run.region_changes, run.lost_at, run.due_at = run.region_changes + 1, None, None



def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def summary(outcomes: list[Outcome], bound: int) -> dict[str, Any]:
    """`bound`: minutes from capacity lost to the first step in the new region that a move should keep."""
    waits, costs = [o.waiting_hours for o in outcomes], [o.relative_cost for o in outcomes]
    return {
        "waiting_hours_mean": round(statistics.fmean(waits), 3),
        "waiting_hours_p95": round(p95(waits), 3),
        "cost_vs_on_demand_mean": round(statistics.fmean(costs), 4),
        "cost_vs_on_demand_p95": round(p95(costs), 4),
        "cross_region_gb_mean": round(statistics.fmean(o.cross_region_gb for o in outcomes), 1),
        "region_changes_mean": round(statistics.fmean(o.region_changes for o in outcomes), 2),
        "cross_region_restores_mean": round(statistics.fmean(o.restores for o in outcomes), 2),
        "cost_parts_mean": {part: round(statistics.fmean(getattr(o, f"{part}_cost") for o in outcomes), 4)
                            for part in ("spot", "on_demand", "transfer")},
        "cost_per_deadline_met": round(sum(costs) / max(1, sum(o.met for o in outcomes)), 4),
        "on_demand_hours_share_mean": round(statistics.fmean(o.on_demand_share for o in outcomes), 4),
        "deadline_met_rate": round(sum(o.met for o in outcomes) / len(outcomes), 4),
        "capacity_lost_to_first_step": move_times_summary([m for o in outcomes for m in o.move_times], bound),
    }


def compare(count: int, seed: int, settings: Settings) -> dict[str, dict[str, Any]]:
    batch = [make_job(random.Random(f"{seed}:{index}"), settings) for index in range(count)]
    cheapest = {id(job): min(REGIONS, key=lambda region: job.spot_share[region]) for job in batch}
    runs: dict[str, Callable[[Job], Outcome]] = {
        "single_region": lambda job: simulate(job, single_region(settings), settings, REGIONS[0]),
        "price_order_failover": lambda job: simulate(job, price_order_failover(job), settings, cheapest[id(job)]),
        "price_order_failover_deadline_rule": lambda job: simulate(
            job, price_order_failover_deadline_rule(job, settings), settings, cheapest[id(job)]),
        "placement_score": lambda job: simulate(job, placement_score(job, settings), settings, REGIONS[0]),
        "placement_score_spot_only": lambda job: simulate(job, placement_score(job, settings, hand_over=False),
                                                          settings, REGIONS[0]),
    }
    bound = settings.region_wait_minutes + 3
    return {name: summary([run(job) for job in batch], bound) for name, run in runs.items()}


def target_met(results: dict[str, dict[str, Any]]) -> bool:
    ours, single, eager = (results[name] for name in ("placement_score", "single_region", "price_order_failover"))
    return (ours["waiting_hours_mean"] < min(single["waiting_hours_mean"], eager["waiting_hours_mean"])
            and ours["cost_vs_on_demand_mean"] < eager["cost_vs_on_demand_mean"])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=14)
    defaults = Settings()
    for name, value in asdict(defaults).items():
        if isinstance(value, tuple):
            parser.add_argument("--" + name.replace("_", "-"), type=float, nargs=2, default=list(value))
        else:
            parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    options = parser.parse_args()
    settings = Settings(**{name: tuple(getattr(options, name)) if isinstance(value, tuple) else getattr(options, name)
                           for name, value in asdict(defaults).items()})
    results = compare(options.jobs, options.seed, settings)
    print(json.dumps({"benchmark": "region_moves", "jobs": options.jobs, "seed": options.seed,
                      "settings": asdict(settings), "regions": list(REGIONS), "by_policy": results,
                      "target": "placement_score waits less than single_region and price_order_failover, "
                                "and costs less than price_order_failover",
                      "target_met": target_met(results)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
