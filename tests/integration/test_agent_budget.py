"""The spending cap under the agent, priced from a trace: at its budget the job saves, is recorded
STOPPED_BY_BUDGET (neither DONE nor FAILED) with no step lost and the cap not passed; an instance
started while the cap is not raised leaves without training; a higher cap resumes from the checkpoint."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.records.status import describe_job
from spot_trainer.costs.budget import job_spend
from spot_trainer.costs.instance_records import read_records
from spot_trainer.costs.spot_prices import TracePrices
from spot_trainer.storage.s3.job_keys import budget_stop
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import STEPPER, AgentProcess, agent_env

USD_PER_HOUR = 36.0  # a cent a second: a cap is reached in seconds
BUDGET = 0.8
BOOTED = 60.0  # each instance booted a minute before its agent starts (and EC2 bills a minute at least): $0.60
STEPS_AFTER_RESUME = 20


def started(aws_env: dict[str, str], store: RemoteStore, disk: Path, imds: FakeImds, trace: Path,
            budget: float, command: str = STEPPER) -> AgentProcess:
    env = agent_env(aws_env, bucket=store.bucket, job=store.job, checkpoint_dir=disk, imds_url=imds.url,
                    instance_id=imds.instance_id, command=command, grace_seconds="10", budget_usd=str(budget),
                    budget_check_seconds="0.5", price_trace=str(trace), launched_at=f"{time.time() - BOOTED}")
    return AgentProcess(env).start()


def test_the_job_stops_at_its_budget_without_losing_a_step_and_a_higher_cap_resumes_it(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "capped")
    trace = tmp_path / "prices.json"
    trace.write_text(json.dumps([{"type": "g5.xlarge", "az": "*", "time": 0, "price": USD_PER_HOUR}]))
    with FakeImds(instance_id="i-capped") as imds:
        first = started(aws_env, store, tmp_path / "first", imds, trace, BUDGET)
        assert first.wait(timeout=60) == 0, first.text()
    [saved] = [int(line.split()[1]) for line in first.lines if re.fullmatch(r"saved \d+", line)]
    status = store.get_json("status.json")
    assert status["state"] == "STOPPED_BY_BUDGET", first.text()
    assert "reaches its budget $0.8000" in status["reason"], status
    assert store.latest_step() == saved == status["checkpoint_step"], "the step in flight at the cap is in S3"
    [budget_event] = store.events("budget")
    assert budget_event["step"] == saved and budget_event["budget_usd"] == BUDGET
    spent = job_spend(read_records(store)[0], TracePrices.from_file(trace), now=time.time()).usd
    # Stopped within the cap, and not long before it: the lead is the check interval and the grace (10.5 s, $0.105).
    assert BUDGET - 0.15 < spent <= BUDGET, f"${spent:.4f} spent"
    assert "STOPPED_BY_BUDGET" in describe_job(status, store.read_latest()[0], store.events())

    with FakeImds(instance_id="i-cap-not-raised") as imds:  # capacity raised, the cap not
        again = started(aws_env, store, tmp_path / "again", imds, trace, BUDGET)
        assert again.wait(timeout=60) == 0, again.text()
    assert not any(line.startswith("starting ") for line in again.lines), again.text()
    assert store.get_json("status.json")["state"] == "STOPPED_BY_BUDGET"
    assert store.latest_step() == saved

    finite = STEPPER.replace("-lt 100000", f"-lt {saved + STEPS_AFTER_RESUME}")
    with FakeImds(instance_id="i-cap-raised") as imds:
        raised = started(aws_env, store, tmp_path / "raised", imds, trace, BUDGET + 10, command=finite)
        assert raised.wait(timeout=60) == 0, raised.text()
    assert any(f"resume from {tmp_path / 'raised'}" in line and line.endswith(f"step-{saved})")
               for line in raised.lines), raised.text()
    status = store.get_json("status.json")
    assert (status["state"], status["step"]) == ("DONE", saved + STEPS_AFTER_RESUME), status


def test_a_node_started_at_a_cap_already_recorded_still_takes_the_group_to_zero(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """Several nodes, the cap reached and recorded by an earlier stop: a node the group starts again (a
    stack update, capacity raised but not the cap) records nothing twice, and leaves no instance running."""
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "capped-nodes")
    trace = tmp_path / "prices.json"
    trace.write_text(json.dumps([{"type": "g5.xlarge", "az": "*", "time": 0, "price": USD_PER_HOUR}]))
    assert store.create_once(budget_stop(0.5), {"reason": "an earlier stop at this cap"})
    with FakeImds(instance_id="i-started-again") as imds:
        env = agent_env(aws_env, bucket=bucket, job=store.job, checkpoint_dir=tmp_path / "disk", imds_url=imds.url,
                        instance_id=imds.instance_id, command=STEPPER, budget_usd="0.5", price_trace=str(trace),
                        launched_at=f"{time.time() - BOOTED}", distributed="true", min_nodes="1", max_nodes="2",
                        asg_name="capped-nodes-group")
        agent = AgentProcess(env).start()
        assert agent.wait(timeout=60) == 0, agent.text()
    assert store.get_json("status.json")["state"] == "STOPPED_BY_BUDGET"
    assert store.events("budget") == [], "recorded once, by the earlier stop"
    assert any("capped-nodes-group to 0" in line for line in agent.lines), agent.text()
