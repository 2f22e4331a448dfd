"""A two-node FSDP2 + DCP script of one's own (jobs/fsdp-regions.toml, jobs/fsdp/train.py, unmodified) loses its
home region's spot capacity: both nodes there get their notice and save, no spot instance launches in home again,
and the regions controller moves the job to eu-west-1 (score 9), not us-west-2 (score 3). The world forms again
there from home's newest step, each node fetching its own ranks' share across regions, and the job ends DONE."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcloud.cloud import LocalCloud
from localcloud.iam_policy import ALLOWED
from localcloud.iam_report import of_stack
from localcloud.interruptions import InterruptionPlan
from localcloud.region_capacity import Board, RegionPlan, parse_region_outage
from localcloud.report import build_report
from spot_trainer.storage.s3.job_keys import MANIFEST
from tests.e2e.conftest import Scenario, play
from tests.e2e.test_region_moves import HIGH, HOME, LOW, instances_in, store

STEPS, SAVE_EVERY = 160, 20
SCRIPT_ENV = {"FSDP_STEPS": str(STEPS), "FSDP_SAVE_EVERY": str(SAVE_EVERY), "FSDP_STEP_SECONDS": "0.1",
              "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def run(local_cloud: LocalCloud) -> Iterator[Scenario]:
    app = local_cloud.synth("jobs/fsdp-regions.toml")
    plan = RegionPlan([parse_region_outage(f"{HOME}:step40:900")], {LOW: 3}, local_cloud.capacity_board)
    try:
        yield from play(local_cloud, app, InterruptionPlan(count=0, notice_seconds=6.0), {}, total_steps=None,
                        command_env=SCRIPT_ENV, region_plan=plan)
    finally:
        Board().write(local_cloud.capacity_board)  # capacity everywhere again for the scenarios after this one


def test_both_nodes_move_to_the_best_scored_region_and_the_job_ends_done_there(run: Scenario) -> None:
    report = build_report(run.player, None)
    assert [(m["from"], m["to"]) for m in report.region_moves] == [(HOME, HIGH)], report.text()
    assert len(instances_in(run, HOME)) == 2 and len(instances_in(run, HIGH)) == 2 and instances_in(run, LOW) == []
    assert store(run, HIGH).get_json("status.json")["state"] == "DONE"
    assert store(run, HIGH).latest_step() == STEPS


def test_the_world_in_the_new_region_starts_from_home_s_newest_step_and_home_is_left_as_it_was(
    run: Scenario
) -> None:
    saved_home = store(run, HOME).latest_step()
    assert saved_home is not None and saved_home >= 40
    events = store(run, HIGH).events()
    resumed = [event["step"] for event in events if event["kind"] == "round_resume"]
    assert resumed and resumed[0] == saved_home, resumed  # the first round there: home's step, not 0
    home_writes = [event for event in store(run, HOME).events() if event.get("instance") in instances_in(run, HIGH)]
    assert home_writes == []  # the nodes in eu-west-1 wrote nothing to home's bucket


def test_every_shard_of_home_s_step_crossed_regions_once(run: Scenario) -> None:
    home = store(run, HOME)
    step = home.latest_step()
    assert step is not None
    files = home.get_json(home.step_prefix(step) + MANIFEST, absolute=True)["files"]
    size = sum(int(entry["size"]) for entry in files.values())
    shared = sum(int(entry["size"]) for key, entry in files.items() if not key.endswith(".distcp"))
    crossed = [event for event in store(run, HIGH).events() if event["kind"] == "region_restore"]
    assert {(event["region"], event["step"]) for event in crossed} == {(HOME, step)}, crossed
    # Each node: its ranks' shards and the step's shared files (.metadata). Once each: no retry, no second move.
    assert sum(event["bytes"] for event in crossed) == size + shared, (crossed, size, shared)
    assert size + shared <= 1.05 * size


def test_iam_allowed_every_call_of_the_job_s_roles_in_every_region_over_the_move(run: Scenario) -> None:
    calls = of_stack(run.cloud.iam_decisions, run.cloud.client("iam"), run.deployment.stack)
    roles = {call.role for call in calls}
    assert any(f"-{HIGH}-" in role for role in roles) and any(f"-{HIGH}-" not in role for role in roles), roles
    assert [call.line() for call in calls if call.decision != ALLOWED] == []
