"""The policies the regions simulation (benchmarks/region_moves.py) compares, each deciding every minute where a
job runs and in which market: the home region only, SkyPilot's price-order failover (with and without today's
deadline rule), and the placement-score move rule of spot_trainer.capacity.regions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.region_world import REGIONS, TYPES, Job, Policy, Run, Settings
from spot_trainer.capacity.policy import SPOT, DeadlinePlan, Progress, choose_market
from spot_trainer.capacity.regions.launch_failures import LaunchFailure
from spot_trainer.capacity.regions.moves import Action, JobPlace, Move, MoveRules, decide
from spot_trainer.capacity.regions.observations import LaunchFailures, RegionObservation
from spot_trainer.capacity.regions.placement_scores import ScoreCache, ScoreRequest


def on_demand_rule(job: Job, run: Run, minute: int, settings: Settings, *, running: bool | None = None) -> str:
    """Today's market rule in the region the job is in (spot_trainer/capacity/policy.py, as P8's uniform_progress)."""
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
