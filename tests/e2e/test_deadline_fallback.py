"""A job with a deadline meets a spot capacity outage: its spot instance is reclaimed and no spot
instance launches. The capacity watch (the stack's Lambda, played here with its own code and its
deployed environment) sees nothing running while the job falls behind its line and switches the
group to on-demand; the on-demand instance resumes, gets comfortably ahead and its agent switches
the group back to spot; the job ends DONE before its deadline. One run; each test checks one promise."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import InterruptionPlan
from localcloud.outages import SpotOutage
from localcloud.report import DEFAULT_DISCOUNT, build_report
from tests.e2e.conftest import Scenario, play

STEPS = 240
TRAIN_ARGS = (f"--model resnet --synthetic --steps {STEPS} --batch-size 16 --width 8 "
              "--checkpoint-every-steps 10 --log-every 1 --min-step-seconds 0.3")
# 240 steps of 0.3 s need 72 s; the line runs over 4 min less 20 s in hand (0.917 s a step). No spot
# capacity for 80 s from the moment S3 holds step 20, whatever the machine's pace (a busy one boots its
# instances later): the instance that trains then is reclaimed (its emergency checkpoint a step or two
# later), none replaces it, and the capacity watch switches to on-demand once nothing runs and the job
# is a margin behind its line (about 22 × 0.917 + 20 ≈ 40 s after its first start, some 30 s into the
# outage; the later the outage, the longer nothing runs). The on-demand instance resumes from that
# checkpoint, is back within a margin of the line in seconds and leaves for spot once its remaining ~220
# steps leave a whole margin to spare and the outage is over: at any pace under about 0.6 s a step,
# which a loaded test machine (three workers on two cores: 0.5 s and more) still keeps.
PARAMETERS = {"TrainArguments": TRAIN_ARGS, "Deadline": "4m", "DeadlineMargin": "20s", "MaxSpotWait": "10m"}
OUTAGE = SpotOutage(start=0.0, length=80.0, after_step=20)


@pytest.fixture(scope="module")
def run(local_cloud: LocalCloud, example_app: Path) -> Iterator[Scenario]:
    yield from play(local_cloud, example_app, InterruptionPlan(count=0, notice_seconds=6), PARAMETERS,
                    total_steps=STEPS, outages=[OUTAGE])


def markets(run: Scenario) -> list[dict[str, Any]]:
    return [event for event in run.events() if event["kind"] == "market"]


def test_the_job_finishes_before_its_deadline(run: Scenario) -> None:
    status = run.s3_json("status.json")
    assert status["state"] == "DONE" and status["step"] == STEPS, status
    done = [event for event in run.events() if event["kind"] == "done"]
    assert done and done[-1]["epoch"] < status["deadline_at"]
    assert run.group()["DesiredCapacity"] == 0


def test_the_outage_switches_the_group_to_on_demand_and_an_on_demand_instance_resumes(run: Scenario) -> None:
    switches = markets(run)
    assert switches and (switches[0]["from"], switches[0]["to"]) == ("spot", "on-demand"), switches
    assert switches[0]["instance"] == "capacity-watch"  # nothing ran: the watch, not an agent, acted
    assert "behind its line to the deadline" in switches[0]["reason"]
    on_demand = [iid for iid, market in run.player.market_of.items() if market == "on-demand"]
    assert on_demand, run.player.market_of
    resumed = [event for event in run.events() if event["kind"] == "resume" and event["instance"] in on_demand]
    assert resumed and resumed[0]["step"] > 0  # from the checkpoint the reclaimed instance saved


def test_once_well_ahead_the_training_node_switches_back_to_spot(run: Scenario) -> None:
    back = [event for event in markets(run) if event["to"] == "spot"]
    assert back, markets(run)
    assert back[0]["instance"] in run.player.market_of and "back to spot" in back[0]["reason"]
    assert back[0]["epoch"] > markets(run)[0]["epoch"]


def test_the_report_prices_the_run_between_all_spot_and_all_on_demand(run: Scenario) -> None:
    report = build_report(run.player, run.s3_json("status.json"))
    all_spot = report.on_demand_same_hours_usd * (1 - DEFAULT_DISCOUNT)  # the default flat trace
    assert all_spot < report.spot_cost_usd < report.on_demand_same_hours_usd, report
    assert [(s["from"], s["to"]) for s in report.market_switches][:2] == [("spot", "on-demand"), ("on-demand", "spot")]
    print(report.text())
    assert "market switch          spot → on-demand" in report.text()
