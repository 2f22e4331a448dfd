"""A job of three regions (jobs/regions.toml) meets a spot outage in all three from step 20. The regions controller
(played with its own code, role and environment at the local pace) finds no region with spot capacity in one
sweep, and then today's rule applies where the job is: no instance has run for max_spot_wait (the MaxSpotWait
parameter), so that region's group goes on-demand, an on-demand instance resumes, and the job ends DONE."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import InterruptionPlan
from localcloud.region_capacity import Board, RegionPlan, parse_region_outage
from localcloud.report import build_report, job_events
from spot_trainer.capacity.policy import ON_DEMAND
from tests.e2e.conftest import Scenario, job_of_its_own, play

STEPS = 60
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")


@pytest.fixture(scope="module")
def run(local_cloud: LocalCloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    app = local_cloud.synth(job_of_its_own(tmp_path_factory, "nowhere", like="regions"))
    plan = RegionPlan([parse_region_outage(f"{region}:step20:900") for region in REGIONS], {},
                      local_cloud.capacity_board)
    try:
        yield from play(local_cloud, app, InterruptionPlan(count=0, notice_seconds=6), {"MaxSpotWait": "40s"},
                        total_steps=STEPS, region_plan=plan)
    finally:
        Board().write(local_cloud.capacity_board)  # capacity everywhere again for the scenarios after this one


def test_after_one_sweep_the_region_the_job_is_in_goes_on_demand_and_the_job_ends_done(run: Scenario) -> None:
    report = build_report(run.player, None)
    assert run.player.latest_step() == STEPS, report.text()
    assert len(report.region_moves) <= len(REGIONS) - 1  # one sweep at most: no region is tried twice
    (switch,) = [e for e in job_events(run.player) if e["kind"] == "market"]
    assert (switch["to"], switch["instance"]) == ("on-demand", "regions-controller")
    assert "no instance has run for" in switch["reason"] and "max_spot_wait" in switch["reason"], switch
    finisher = max(run.player.instances.values(), key=lambda instance: instance.launched_at)
    assert run.player.market_of[finisher.instance_id] == ON_DEMAND
    assert run.player.region_of(finisher.instance_id) == switch["region"]


def test_the_on_demand_instance_resumes_from_the_step_saved_at_the_outage(run: Scenario) -> None:
    (first,) = [iid for iid in run.player.instances if run.player.region_of(iid) == REGIONS[0]
                and run.player.market_of[iid] != ON_DEMAND]
    finisher = max(run.player.instances.values(), key=lambda instance: instance.launched_at).instance_id
    saved = run.player.logs[first].max_step
    assert saved is not None and saved >= 20
    assert run.player.logs[finisher].resumed_step == saved  # no completed step lost, wherever it runs now
