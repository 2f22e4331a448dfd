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
region (AWS launches the replacement first, spot_trainer/capacity/market.py; P8 plays it the same way).

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
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spot_trainer.capacity.policy import ON_DEMAND, SPOT

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.region_policies import (  # noqa: E402
    placement_score,
    price_order_failover,
    price_order_failover_deadline_rule,
    single_region,
)
from benchmarks.region_timing import MoveTime, move_times_summary, start_minutes  # noqa: E402
from benchmarks.region_world import REGIONS, Job, Outcome, Policy, Run, Settings, make_job  # noqa: E402


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
    run, minute = Run(region=home), 0
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
