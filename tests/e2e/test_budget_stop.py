"""The example job in the local spot cloud with a small cap (BudgetUSD) and a price trace: the job
stops at its cap, recorded STOPPED_BY_BUDGET with no completed step lost and the cap not passed, and
the group is at zero; `status` shows the cap beside the spend and what finishing would cost."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import InterruptionPlan
from localcloud.report import build_report
from spot_trainer.costs.budget import job_spend, outlook
from spot_trainer.costs.cost_text import describe_outlook
from spot_trainer.costs.instance_records import read_records
from spot_trainer.costs.job_cost import job_cost
from spot_trainer.costs.spot_prices import TracePrices
from spot_trainer.storage.steps.remote import RemoteStore
from tests.e2e.conftest import JOB, TOTAL_STEPS, TRAIN_ARGS, Scenario, play

pytestmark = pytest.mark.slow  # about two minutes; the agent's side is tests/integration/test_agent_budget.py

USD_PER_HOUR = 3.6  # a tenth of a cent a second, for every type the example may get
# The cap is reached 99 s after launch: the spend (at least EC2's first minute), plus a second to the next
# check and the 60 s grace of the example job, reaches $0.16 at 99 s, mid-way through 400 paced steps.
BUDGET = "0.16"
STEPS = 400


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prices") / "prices.json"
    path.write_text(json.dumps([{"type": kind, "az": "*", "time": 0, "price": USD_PER_HOUR}
                                for kind in ("c7i.xlarge", "c6i.xlarge", "m6i.xlarge")]))
    return path


@pytest.fixture(scope="module")
def capped(local_cloud: LocalCloud, example_app: Path, trace: Path) -> Iterator[Scenario]:
    arguments = TRAIN_ARGS.replace(f"--steps {TOTAL_STEPS}", f"--steps {STEPS}")
    yield from play(local_cloud, example_app, InterruptionPlan(), {"TrainArguments": arguments, "BudgetUSD": BUDGET},
                    total_steps=STEPS, price_trace=trace)


def test_the_job_stops_at_its_cap_with_no_step_lost(capped: Scenario, trace: Path) -> None:
    status = capped.s3_json("status.json")
    assert status["state"] == "STOPPED_BY_BUDGET", status
    assert "reaches its budget $0.1600" in status["reason"], status
    (instance,) = capped.player.logs.values()
    assert instance.emergency_step is not None and 0 < instance.emergency_step < STEPS
    assert capped.s3_json("latest.json")["step"] == instance.emergency_step == status["checkpoint_step"]
    assert capped.group()["DesiredCapacity"] == 0
    store = RemoteStore(capped.cloud.client("s3"), capped.deployment.bucket, JOB)
    [stopped] = store.events("budget")
    assert stopped["step"] == instance.emergency_step
    lives, problems = read_records(store)
    assert problems == []
    assert job_spend(lives, TracePrices.from_file(trace), now=time.time()).usd <= float(BUDGET)
    cost = job_cost(lives, [], TracePrices.from_file(trace), now=time.time(), job_running=False)
    budget, finish = describe_outlook(outlook(status, cost, TracePrices.from_file(trace), now=time.time()))
    assert budget.startswith("budget         $0.1") and "spent of $0.1600" in budget, budget
    assert f"more for {STEPS - status['step']} steps at" in finish, finish
    # The local report prices the work done, not the whole job, as one uninterrupted on-demand run.
    report = build_report(capped.player, status, prices=TracePrices.from_file(trace))
    assert report.state == "STOPPED_BY_BUDGET" and 0 < report.useful_work_fraction <= 1, report
