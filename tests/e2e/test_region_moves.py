"""A job of three regions (jobs/regions.toml) loses its home region's spot capacity mid-run: the instance there
gets its notice and saves, no spot instance launches in home again, and the regions controller (the home stack's
Lambda, played with its own code, role and deployed environment at the local pace: region_wait 20 s) moves the
job to the best-scored region: not us-west-2, which scores 3, but eu-west-1, which scores 9. The instance there
restores the step home saved, across regions, and the job ends DONE there. One run; each test checks one promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import InterruptionPlan
from localcloud.region_capacity import Board, RegionPlan, parse_region_outage
from localcloud.report import build_report
from spot_trainer.capacity.policy import parse_duration
from spot_trainer.storage.steps.remote import RemoteStore
from tests.e2e.conftest import Scenario, play

STEPS = 60
NOTICE_SECONDS = 6.0
HOME, LOW, HIGH = "us-east-1", "us-west-2", "eu-west-1"


@pytest.fixture(scope="module")
def run(local_cloud: LocalCloud) -> Iterator[Scenario]:
    app = local_cloud.synth("regions")
    plan = RegionPlan([parse_region_outage(f"{HOME}:step20:900")], {LOW: 3}, local_cloud.capacity_board)
    try:
        yield from play(local_cloud, app, InterruptionPlan(count=0, notice_seconds=NOTICE_SECONDS), {},
                        total_steps=STEPS, region_plan=plan)
    finally:
        Board().write(local_cloud.capacity_board)  # capacity everywhere again for the scenarios after this one


def store(run: Scenario, region: str) -> RemoteStore:
    (place,) = [p for p in run.deployment.every_region() if p.region == region]
    return RemoteStore(run.cloud.client("s3", region), place.bucket, place.job)


def instances_in(run: Scenario, region: str) -> list[str]:
    return [iid for iid in run.player.instances if run.player.region_of(iid) == region]


def test_the_job_moves_once_to_the_best_scored_region_and_ends_done_there(run: Scenario) -> None:
    report = build_report(run.player, None)
    assert run.player.latest_step() == STEPS
    assert [(m["from"], m["to"]) for m in report.region_moves] == [(HOME, HIGH)], report.text()
    reason = report.region_moves[0]["reason"]
    assert f"no instance has run in {HOME}" in reason and f"moving to {HIGH} (placement score 9" in reason, reason
    assert instances_in(run, LOW) == [] and len(instances_in(run, HIGH)) == 1
    assert store(run, HIGH).get_json("status.json")["state"] == "DONE"


def test_no_completed_step_is_lost_and_no_two_regions_ever_train_at_once(run: Scenario) -> None:
    (home_instance,) = instances_in(run, HOME)
    (moved,) = instances_in(run, HIGH)
    saved_home = store(run, HOME).latest_step()
    assert saved_home is not None and saved_home >= 20
    logs = run.player.logs
    assert logs[moved].resumed_step == saved_home  # the newest step, wherever it was saved
    assert logs[home_instance].max_step == saved_home  # its emergency checkpoint: nothing it trained is lost
    home_end, high_start = logs[home_instance].last_step_at, logs[moved].first_step_at
    assert home_end is not None and high_start is not None and home_end < high_start
    # one lease for the job, in home's bucket, which the agent in eu-west-1 took too
    lease = store(run, HOME).get_json("lease.json")
    assert lease is not None and lease["owner"] == moved and store(run, HIGH).get_json("lease.json") is None


def test_the_newest_step_crosses_regions_once_at_its_own_size(run: Scenario) -> None:
    events = [event for region in (HOME, LOW, HIGH) for event in store(run, region).events()]
    (crossed,) = [event for event in events if event["kind"] == "region_restore"]
    home = store(run, HOME)
    manifest = home.get_json(home.step_prefix(int(crossed["step"])) + "MANIFEST.json", absolute=True)
    assert manifest is not None, crossed
    size = sum(int(entry["size"]) for entry in manifest["files"].values())
    assert (crossed["region"], crossed["step"]) == (HOME, home.latest_step())
    assert 0 < crossed["bytes"] <= 1.05 * size


def test_training_resumes_within_region_wait_a_notice_and_a_boot(run: Scenario) -> None:
    """From the notice in home to the first step in eu-west-1: the notice, region_wait, and a replacement's boot
    and restore, measured here as twice the first instance's launch to first step."""
    (home_instance,) = instances_in(run, HOME)
    (moved,) = instances_in(run, HIGH)
    (notice,) = run.player.interruptions
    first = run.player.logs[home_instance].first_step_at
    boot = (first or 0.0) - run.player.instances[home_instance].launched_at
    again = run.player.logs[moved].first_step_at
    assert again is not None and first is not None
    wait = parse_duration(run.player.options.region_wait)
    bound = NOTICE_SECONDS + wait + 2 * boot + 2 * run.player.options.watch_seconds
    assert again - notice.at <= bound, (again - notice.at, bound)


def test_status_by_job_name_shows_where_the_job_runs_each_region_and_the_move(run: Scenario) -> None:
    env = {**os.environ, **run.cloud.aws_env, "AWS_DEFAULT_REGION": HOME}
    shown = subprocess.run([sys.executable, "-m", "spot_trainer", "status", "--job", run.deployment.job], env=env,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "state          DONE" in text, text  # read from eu-west-1's bucket, where the job ran last
    assert "interruptions  1" in text  # home's notice, from home's bucket: every region's events count
    assert re.search(rf"across regions [0-9.]+ MB restored from another region's bucket in 1 start\(s\), the newest "
                     rf"step [0-9]+ from {HOME}", text), text
    assert f"regions        active {HIGH} since " in text
    shown_regions = [line.split()[0] for line in text.splitlines() if line.startswith("  ") and " wants " in line]
    assert shown_regions == [HOME, LOW, HIGH]  # as the job file lists them, home first
    assert f"  {LOW:<14} wants 0, runs 0, placement score 3" in text
    assert f"  moved {HOME} → {HIGH} at " in text and "placement score 9" in text
