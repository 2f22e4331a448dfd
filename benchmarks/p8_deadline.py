"""P8: keeping a deadline on spot capacity that comes and goes, and what it costs.

A few hundred simulated jobs (seeded, reproducible), each with its own spot availability trace:
available and unavailable periods alternate, both drawn from exponential distributions whose means
make --unavailability of the time unavailable (mean outage --outage-hours). Each job has a compute
time, a deadline at 1.3-2.0x that time after its first start, and a spot price of 0.3-0.4x
on-demand. Time runs in one-minute ticks. Every (re)start costs --restart-minutes of boot and
restore, billed with no progress; checkpoints are written every --checkpoint-minutes of training.
A spot instance is interrupted when its capacity goes (an outage starts) and, besides, at
--interruptions-per-hour; an interruption is announced with probability --announced-share (the
notice saves the work) and otherwise loses the work since the last checkpoint. On-demand capacity
never runs out. A switch to on-demand stops a running spot instance after a checkpoint and starts an
on-demand one; a switch back to spot keeps the on-demand instance running until spot capacity is
there (AWS launches the replacement first), then hands over the same way. Side by side, on the same
traces:

  always_spot           spot only; outages are waited out
  spot_then_on_demand   spot until no spot instance has run for --max-spot-wait, then on-demand to
                        the end
  uniform_progress      spot_trainer.capacity.policy.choose_market each tick, also while nothing runs
                        (the capacity watch applies it then), with a --margin-minutes margin

Per policy and unavailability level: deadline met rate, mean and p95 cost relative to running the
whole job on-demand (one boot plus the compute time), and the mean share of instance hours on
on-demand. For scale, `hindsight_bound`: what a policy that knew the trace in advance could not beat
(every spot minute before the deadline used, the rest on-demand, no boots, nothing lost).
Target: uniform_progress meets every deadline at <= 50% of the on-demand cost (mean) at 30%
unavailability.

    python benchmarks/p8_deadline.py [--jobs 300] [--seed 8] [--levels 0.1 0.3 0.5] [--slack 1.3 2.0]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from spot_trainer.capacity.policy import (
    ON_DEMAND,
    SPOT,
    DeadlinePlan,
    Progress,
    choose_market,
    spot_wait_exceeded,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script too: the checkout's folders
from benchmarks.capacity_traces import trace  # noqa: E402
from benchmarks.training_run import TrainingRun  # noqa: E402
from stacks.help_text import first_paragraph  # noqa: E402

SECONDS_PER_STEP = 60.0  # one step is one tick of training


@dataclass(frozen=True)
class Settings:
    restart_minutes: int = 6
    checkpoint_minutes: int = 15
    margin_minutes: int = 30
    max_spot_wait_minutes: int = 60
    outage_hours: float = 2.0
    interruptions_per_hour: float = 0.05
    announced_share: float = 0.5
    compute_hours: tuple[float, float] = (6.0, 24.0)
    slack: tuple[float, float] = (1.3, 2.0)
    spot_price: tuple[float, float] = (0.3, 0.4)


@dataclass(frozen=True)
class Job:
    compute: int  # minutes of training = steps
    deadline: int  # minutes after the first start
    spot_price: float  # share of the on-demand price
    available: bytes  # per minute: spot capacity there (1) or not (0); beyond the end, there
    reclaimed: bytes  # per minute: a running spot instance is interrupted
    announced: bytes  # per minute: that interruption comes with a notice

    def spot_at(self, minute: int) -> bool:
        return minute >= len(self.available) or bool(self.available[minute])


@dataclass
class Run(TrainingRun):
    """One job under one policy: where training stands, what has been billed, and its starts."""

    spot_seen: int = 0  # the last minute a spot instance ran
    starts: int = 0


@dataclass(frozen=True)
class Outcome:
    met: bool
    relative_cost: float
    on_demand_share: float
    starts: int


Policy = Callable[[Job, Run, int], str]


def make_job(rng: random.Random, unavailability: float, settings: Settings) -> Job:
    compute = round(rng.uniform(*settings.compute_hours) * 60)
    deadline = round(compute * rng.uniform(*settings.slack))
    minutes = deadline * 4
    available = trace(rng, minutes, unavailability, settings.outage_hours)
    rate = settings.interruptions_per_hour / 60
    # Capacity going away interrupts a running spot instance; so do the odd reclaims in between.
    reclaimed = bytes(1 if (not available[m] and (m == 0 or available[m - 1])) or rng.random() < rate else 0
                      for m in range(minutes))
    announced = bytes(1 if rng.random() < settings.announced_share else 0 for _ in range(minutes))
    return Job(compute, deadline, rng.uniform(*settings.spot_price), bytes(available), reclaimed, announced)


def always_spot(job: Job, run: Run, minute: int) -> str:
    return SPOT


def spot_then_on_demand(settings: Settings) -> Policy:
    def policy(job: Job, run: Run, minute: int) -> str:
        if run.market == ON_DEMAND:
            return ON_DEMAND  # once fallen back, it stays
        waited = 0 if run.instance == SPOT else minute - run.spot_seen
        return ON_DEMAND if spot_wait_exceeded(waited * 60.0, settings.max_spot_wait_minutes * 60.0) else SPOT
    return policy


def uniform_progress(settings: Settings) -> Policy:
    def policy(job: Job, run: Run, minute: int) -> str:
        plan = DeadlinePlan.checked(0.0, job.deadline * 60.0, job.compute, settings.margin_minutes * 60.0)
        progress = Progress(minute * 60.0, run.step, SECONDS_PER_STEP if run.trained else None)
        return choose_market(plan, progress, run.market, running=run.instance is not None).market
    return policy


def lose_spot(job: Job, run: Run, minute: int) -> None:
    """The spot instance is interrupted: the notice saves the work, or it goes back to the checkpoint."""
    if job.announced[minute] and not run.booting:
        run.saved = run.step
    run.step, run.instance = run.saved, None


def switch(run: Run, market: str) -> None:
    """The group moves to `market`. AWS launches the replacement first: an instance of the other
    market stops (checkpointing) only once the new one can launch, which for on-demand is at once
    and for spot when there is capacity (see `replace_when_spot_launches`)."""
    run.market = market
    if market == ON_DEMAND and run.instance == SPOT:
        stop(run)


def stop(run: Run) -> None:
    if not run.booting:
        run.saved = run.step
    run.step, run.instance = run.saved, None


def replace_when_spot_launches(run: Run, spot: bool) -> None:
    """Back on spot with capacity there: the on-demand instance hands over (its boot is the cost)."""
    if run.market == SPOT and run.instance == ON_DEMAND and spot:
        stop(run)


def tick(job: Job, run: Run, minute: int, settings: Settings) -> None:
    """A minute of the running instance: billed, and either booting or training."""
    run.cost += 1.0 if run.instance == ON_DEMAND else job.spot_price
    run.minutes += 1
    run.on_demand_minutes += run.instance == ON_DEMAND
    if run.instance == SPOT:
        run.spot_seen = minute
    if run.booting:
        run.booting -= 1
        return
    run.step += 1
    run.trained = True
    run.since_save += 1
    if run.since_save >= settings.checkpoint_minutes:
        run.saved, run.since_save = run.step, 0


def simulate(job: Job, policy: Policy, settings: Settings) -> Outcome:
    run, minute = Run(), 0
    reclaimed_at = len(job.reclaimed)
    while run.step < job.compute:
        spot = job.spot_at(minute)
        if run.instance == SPOT and (not spot or (minute < reclaimed_at and job.reclaimed[minute])):
            lose_spot(job, run, minute)
        wanted = policy(job, run, minute)
        if wanted != run.market:
            switch(run, wanted)
        replace_when_spot_launches(run, spot)
        if run.instance is None and (run.market == ON_DEMAND or spot):
            run.instance, run.booting, run.since_save = run.market, settings.restart_minutes, 0
            run.starts += 1
        if run.instance is not None:
            tick(job, run, minute, settings)
        minute += 1
    on_demand_cost = job.compute + settings.restart_minutes
    return Outcome(minute <= job.deadline, run.cost / on_demand_cost, run.on_demand_minutes / run.minutes,
                   run.starts)


def hindsight_bound(job: Job, settings: Settings) -> float:
    spot = min(job.compute, sum(job.available[:job.deadline]))
    return (job.spot_price * spot + job.compute - spot) / (job.compute + settings.restart_minutes)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def summary(outcomes: list[Outcome]) -> dict[str, float]:
    costs = [outcome.relative_cost for outcome in outcomes]
    return {
        "deadline_met_rate": round(sum(outcome.met for outcome in outcomes) / len(outcomes), 4),
        "cost_vs_on_demand_mean": round(statistics.fmean(costs), 4),
        "cost_vs_on_demand_p95": round(p95(costs), 4),
        "on_demand_hours_share_mean": round(statistics.fmean(o.on_demand_share for o in outcomes), 4),
        "starts_mean": round(statistics.fmean(outcome.starts for outcome in outcomes), 2),
    }


def policies(settings: Settings) -> dict[str, Policy]:
    return {"always_spot": always_spot, "spot_then_on_demand": spot_then_on_demand(settings),
            "uniform_progress": uniform_progress(settings)}


def jobs(count: int, seed: int, unavailability: float, settings: Settings) -> list[Job]:
    """The same job sizes, deadlines and prices at every level; only the traces differ."""
    return [make_job(random.Random(f"{seed}:{index}:{unavailability}"), unavailability, settings)
            for index in range(count)]


def level(count: int, seed: int, unavailability: float, settings: Settings) -> dict[str, dict[str, float]]:
    batch = jobs(count, seed, unavailability, settings)
    results: dict[str, dict[str, float]] = {name: summary([simulate(job, policy, settings) for job in batch])
                                            for name, policy in policies(settings).items()}
    bounds = [hindsight_bound(job, settings) for job in batch]
    results["hindsight_bound"] = {"cost_vs_on_demand_mean": round(statistics.fmean(bounds), 4),
                                  "cost_vs_on_demand_p95": round(p95(bounds), 4)}
    return results


def target_met(results: dict[str, dict[str, dict[str, float]]]) -> bool:
    uniform = results.get("30%", {}).get("uniform_progress")
    return uniform is not None and uniform["deadline_met_rate"] == 1.0 and uniform["cost_vs_on_demand_mean"] <= 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--levels", type=float, nargs="+", default=[0.1, 0.3, 0.5],
                        help="shares of the time spot capacity is unavailable")
    parser.add_argument("--slack", type=float, nargs=2, default=[1.3, 2.0], metavar=("LOW", "HIGH"),
                        help="deadlines at LOW-HIGH times the compute time after the first start")
    defaults = Settings()
    for name in ("restart_minutes", "checkpoint_minutes", "margin_minutes", "max_spot_wait_minutes"):
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name))
    for name in ("outage_hours", "interruptions_per_hour", "announced_share"):
        parser.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(defaults, name))
    options = parser.parse_args()
    settings = Settings(**{name: getattr(options, name) for name in (
        "restart_minutes", "checkpoint_minutes", "margin_minutes", "max_spot_wait_minutes", "outage_hours",
        "interruptions_per_hour", "announced_share")}, slack=(options.slack[0], options.slack[1]))
    results = {f"{round(share * 100)}%": level(options.jobs, options.seed, share, settings) for share in options.levels}
    print(json.dumps({
        "benchmark": "p8_deadline",
        "jobs": options.jobs,
        "seed": options.seed,
        "settings": asdict(settings),
        "by_unavailability": results,
        "target": "uniform_progress at 30% unavailability: every deadline met at <= 50% of the on-demand cost",
        "target_met": target_met(results),
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
