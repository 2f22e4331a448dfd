"""Spot notices: the emergency checkpoint reaches S3 before the agent lets go, and the next one resumes."""

from __future__ import annotations

import time
from pathlib import Path

import boto3
import pytest
import torch

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.records.status import describe_job
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import STEPPER, AgentProcess, agent_env

TRAIN_ARGS = ("--model lm --synthetic --steps 5000 --width 16 --context 16 --batch-size 8 "
              "--checkpoint-every-steps 10 --log-every 1")


def last_step(agent: AgentProcess) -> int:
    return max(event["step"] for event in agent.events("step"))


def run_until_notice(agent: AgentProcess, imds: FakeImds, past_step: int, **notice: float) -> None:
    """Let the agent train beyond `past_step`, then announce a notice through IMDS."""
    try:
        agent.wait_for(lambda: any(e["step"] > past_step for e in agent.events("step")),
                       what=f"step {past_step}")
        if notice.get("rebalance"):
            imds.recommend_rebalance()
        else:
            imds.announce_interruption(in_seconds=120)
        assert agent.wait() == 0, agent.text()
    finally:
        agent.stop()


def test_notice_uploads_the_emergency_checkpoint_and_the_next_agent_resumes(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"notice-{bucket[-8:]}"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    with FakeImds(instance_id="i-first") as imds:
        first = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "a",
                                       imds_url=imds.url, instance_id="i-first", command="builtin",
                                       train_args=TRAIN_ARGS)).start()
        run_until_notice(first, imds, past_step=15)
    stopped_at = last_step(first)
    assert [e["step"] for e in first.events("emergency_checkpoint")] == [stopped_at]
    assert store.latest_step() == stopped_at, "no completed step may be lost"
    status = store.get_json("status.json")
    assert (status["state"], status["step"], status["interruptions"]) == ("INTERRUPTED", stopped_at, 1)
    assert status["checkpoint_step"] == stopped_at and status["instance"] == "i-first"

    with FakeImds(instance_id="i-second") as imds:  # a rebalance counts only when asked for
        second = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "b",
                                        imds_url=imds.url, instance_id="i-second", command="builtin",
                                        train_args=TRAIN_ARGS, react_to_rebalance="true")).start()
        run_until_notice(second, imds, past_step=stopped_at + 5, rebalance=True)
    assert [e["step"] for e in second.events("resumed")] == [stopped_at]
    assert min(e["step"] for e in second.events("step")) == stopped_at + 1
    assert store.latest_step() == last_step(second), second.text()
    status = store.get_json("status.json")
    assert (status["state"], status["interruptions"], status["attempt"]) == ("INTERRUPTED", 2, 2)
    events = store.events()
    assert [e["kind"] for e in events if e["kind"] not in ("checkpoint", "boot", "first_step")] == [
        "start", "interruption", "start", "resume", "interruption"]
    reasons = [e["reason"] for e in events if e["kind"] == "interruption"]
    assert reasons == ["spot interruption notice", "rebalance recommendation"]
    uploads = [e for e in events if e["kind"] == "checkpoint"]
    assert all(e["bytes"] > 0 and e["upload_seconds"] >= 0 for e in uploads)


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() == "DEFAULT",
                    reason="this CPU already runs torch's plain kernels: there is no other instruction set to move to")
def test_a_replacement_of_another_kind_resumes_and_status_says_exact_resume_was_lost_there(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """A mixed fleet: the replacement runs torch's kernels for another instruction set (ATEN_CPU_CAPABILITY,
    as another instance type would), resumes with nothing lost, and the job's record says from which step
    the run is no longer bit-identical."""
    job = f"mixed-{bucket[-8:]}"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    common = {"bucket": bucket, "job": job, "command": "builtin", "train_args": TRAIN_ARGS}
    with FakeImds(instance_id="i-first") as imds:
        first = AgentProcess(agent_env(aws_env, checkpoint_dir=tmp_path / "a", imds_url=imds.url,
                                       instance_id="i-first", **common)).start()
        run_until_notice(first, imds, past_step=15)
    stopped_at = last_step(first)
    assert not first.events("not_bit_identical")

    with FakeImds(instance_id="i-second") as imds:
        second = AgentProcess(agent_env(aws_env, checkpoint_dir=tmp_path / "b", imds_url=imds.url,
                                        instance_id="i-second", **common) | {"ATEN_CPU_CAPABILITY": "default"}).start()
        run_until_notice(second, imds, past_step=stopped_at + 5)

    assert [e["step"] for e in second.events("resumed")] == [stopped_at]
    recorded = [e for e in store.events() if e["kind"] == "not_bit_identical"]
    native = torch.backends.cpu.get_cpu_capability()
    reason = f"trained on another platform (device CPU ({native}) -> CPU (DEFAULT))"
    assert [(e["step"], e["reason"], e["instance"]) for e in recorded] == [(stopped_at, reason, "i-second")]
    summary = describe_job(store.get_json("status.json"), store.read_latest()[0], store.events())
    assert f"exact resume   lost from step {stopped_at}: {reason}" in summary


@pytest.fixture
def cloudwatch_clients(aws_env: dict[str, str]) -> tuple[object, object]:
    endpoint = aws_env["AWS_ENDPOINT_URL"]
    return boto3.client("logs", endpoint_url=endpoint), boto3.client("cloudwatch", endpoint_url=endpoint)


def test_output_reaches_the_instance_log_stream_and_metrics(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, cloudwatch_clients: tuple[object, object]
) -> None:
    logs, cloudwatch = cloudwatch_clients
    job = f"logs-{bucket[-8:]}"
    bootstrap_log = tmp_path / "bootstrap.log"
    bootstrap_log.write_text("2026-01-01T00:00:00Z spot-trainer-userdata[agent-service]: COMPLETED in 1s\n")
    with FakeImds(instance_id="i-logs") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "a",
                                       imds_url=imds.url, instance_id="i-logs", command=STEPPER,
                                       metrics_namespace=f"Test/{job}",
                                       bootstrap_log=str(bootstrap_log))).start()
        run_until_notice(agent, imds, past_step=25)
    messages = [e["message"] for e in logs.get_log_events(  # type: ignore[attr-defined]
        logGroupName=f"/spot-trainer/{job}", logStreamName="i-logs", startFromHead=True)["events"]]
    assert any('"event": "step"' in message for message in messages)
    assert any("spot-trainer-userdata[agent-service]: COMPLETED" in message for message in messages)
    assert any("spot interruption notice" in message for message in messages)
    metrics = cloudwatch.list_metrics(Namespace=f"Test/{job}")["Metrics"]  # type: ignore[attr-defined]
    names = {m["MetricName"] for m in metrics}
    assert {"Step", "Loss", "SamplesPerSecond", "CheckpointUploadSeconds"} <= names
    assert all(m["Dimensions"] == [{"Name": "Job", "Value": job}] for m in metrics)


def test_a_command_that_exits_0_on_the_stop_signal_is_interrupted_not_done(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"exit0-{bucket[-8:]}"
    polite = STEPPER.replace("exit 75", "exit 0")  # many scripts end "successfully" on SIGTERM
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    with FakeImds(instance_id="i-polite") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "a",
                                       imds_url=imds.url, instance_id="i-polite", command=polite)).start()
        run_until_notice(agent, imds, past_step=12)
    status = store.get_json("status.json")
    assert status["state"] == "INTERRUPTED", status
    assert "done" not in [e["kind"] for e in store.events()]
    assert store.latest_step() == last_step(agent)


def test_a_command_that_will_not_stop_is_cut_before_the_reclaim_not_after_its_grace_period(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """AWS takes the instance at the notice's time whatever the agent does: a grace period of 60 s
    cannot be waited out on a 6 s notice, and the log says the emergency checkpoint did not fit."""
    deaf = "trap '' TERM; while true; do sleep 0.1; done"  # ignores the stop signal (so do its children)
    with FakeImds(instance_id="i-deaf") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=f"deaf-{bucket[-8:]}", checkpoint_dir=tmp_path,
                                       imds_url=imds.url, instance_id="i-deaf", command=deaf,
                                       grace_seconds="60")).start()
        try:
            agent.wait_for(lambda: any("starting \"trap" in line for line in agent.lines), what="the command")
            imds.announce_interruption(in_seconds=6)
            announced = time.monotonic()
            agent.wait_for(lambda: any("command exited with code -9" in line for line in agent.lines), timeout=30,
                           what="the command killed")
            assert time.monotonic() - announced < 6, agent.text()  # the reclaim
            assert agent.wait(timeout=40) == 0, agent.text()
        finally:
            agent.stop()
    assert any("the emergency checkpoint did not fit before the reclaim" in line for line in agent.lines)
