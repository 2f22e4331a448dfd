"""A systemd stop is handled like a notice; an agent whose lease was taken stops without publishing."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import STEPPER, AgentProcess, agent_env, descendants
from tests.integration.fleet import create_group, desired_capacity


def started_agent(
    aws_env: dict[str, str], bucket: str, job: str, tmp_path: Path, imds: FakeImds
) -> AgentProcess:
    agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "c",
                                   imds_url=imds.url, instance_id=imds.instance_id, command=STEPPER)).start()
    agent.wait_for(lambda: any(e["step"] >= 25 for e in agent.events("step")), what="step 25")
    return agent


def test_sigterm_to_the_agent_saves_uploads_and_exits_cleanly(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    with FakeImds(instance_id="i-stop") as imds:
        agent = started_agent(aws_env, bucket, "stop", tmp_path, imds)
        try:
            agent.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
            assert agent.wait() == 0, agent.text()
        finally:
            agent.stop()
    saved = int(next(line for line in agent.lines if line.startswith("saved "))[6:])
    assert saved == max(e["step"] for e in agent.events("step"))
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "stop")
    assert store.latest_step() == saved
    status = store.get_json("status.json")
    assert (status["state"], status["reason"]) == ("INTERRUPTED", "agent asked to stop")
    lease = store.get_json("lease.json")
    assert lease["expires_at"] <= time.time(), "the lease is handed back, not left to expire"


def test_an_agent_whose_lease_was_taken_stops_training_and_publishes_nothing(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"])
    store = RemoteStore(s3, bucket, "stolen")
    with FakeImds(instance_id="i-stale") as imds:
        agent = started_agent(aws_env, bucket, "stolen", tmp_path, imds)
        try:
            command_pids = descendants(agent.process.pid)  # type: ignore[union-attr]
            now = time.time()
            thief = {"owner": "i-thief", "token": 99, "expires_at": now + 3600, "written_at": now}
            s3.put_object(Bucket=bucket, Key="stolen/lease.json", Body=json.dumps(thief).encode())
            published_before = store.latest_step()
            assert agent.wait() == 1, agent.text()
        finally:
            agent.stop()
    assert agent.lines[-1] == "spot-trainer: the job lease was taken over by another agent; stopped training"
    assert command_pids and not any(Path(f"/proc/{pid}").exists() for pid in command_pids)
    assert store.latest_step() == published_before
    assert store.get_json("lease.json")["owner"] == "i-thief"


def scaled_in_while_training(
    aws_env: dict[str, str], bucket: str, job: str, group: str, tmp_path: Path
) -> AgentProcess:
    """An agent of `job` in `group` (hook "drain-hook") chosen for scale-in at step 12; it has exited."""
    with FakeImds(instance_id=f"i-{job}") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "c",
                                       imds_url=imds.url, instance_id=f"i-{job}", command=STEPPER,
                                       lifecycle_hook="drain-hook", asg_name=group)).start()
        try:
            agent.wait_for(lambda: any(e["step"] >= 12 for e in agent.events("step")), what="step 12")
            imds.set_target_lifecycle_state("Terminated")
            assert agent.wait() == 0, agent.text()
        finally:
            agent.stop()
    return agent


def test_scale_in_through_the_lifecycle_state_stops_training_like_a_notice(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    group = f"fleet-{bucket[-8:]}"
    create_group(aws_env, group, drain_hook="drain-hook")
    agent = scaled_in_while_training(aws_env, bucket, "scalein", group, tmp_path)
    saved = int(next(line for line in agent.lines if line.startswith("saved "))[6:])
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "scalein")
    assert store.latest_step() == saved
    status = store.get_json("status.json")
    assert (status["state"], status["reason"]) == ("INTERRUPTED", "scale-in (lifecycle Terminated)")
    # Only once the checkpoint is in S3 is the instance let go.
    released = agent.lines.index("spot-trainer: completed lifecycle action drain-hook")
    assert released > next(i for i, line in enumerate(agent.lines) if f"checkpoint step {saved} uploaded" in line)


def test_a_missing_hook_is_logged_and_does_not_fail_the_shutdown(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    agent = scaled_in_while_training(aws_env, bucket, "nohook", "no-such-group", tmp_path)
    assert any(line.startswith("spot-trainer: could not complete lifecycle action drain-hook: ")
               and "No Lifecycle Hook found" in line for line in agent.lines), agent.text()


def test_after_scaling_to_zero_the_agent_releases_its_instance_from_the_hook(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    group = f"fleet-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group, drain_hook="drain-hook")
    with FakeImds(instance_id="i-last") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job="last", checkpoint_dir=tmp_path / "c",
                                       imds_url=imds.url, instance_id="i-last", command="exit 0",
                                       lifecycle_hook="drain-hook", asg_name=group)).start()
        try:
            agent.wait_for(lambda: any("set desired capacity" in line for line in agent.lines), what="scale to 0")
            time.sleep(0.5)
            assert agent.process.poll() is None, "the agent waits for the group to pick its instance"  # type: ignore[union-attr]
            imds.set_target_lifecycle_state("Terminated")  # AWS: the group moves it to Terminating:Wait
            assert agent.wait() == 0, agent.text()
        finally:
            agent.stop()
    assert desired_capacity(autoscaling, group) == 0
    assert agent.lines[-1] == "spot-trainer: completed lifecycle action drain-hook", agent.text()


def test_a_standby_chosen_for_scale_in_leaves_at_once(aws_env: dict[str, str], bucket: str, tmp_path: Path) -> None:
    """nodes > 1: the instance waiting for the lease holds no checkpoint, so it lets its hook go at once."""
    group = f"fleet-{bucket[-8:]}"
    create_group(aws_env, group, drain_hook="drain-hook")
    with FakeImds(instance_id="i-trainer") as trainer_imds, FakeImds(instance_id="i-standby") as standby_imds:
        trainer, standby = (
            AgentProcess(agent_env(aws_env, bucket=bucket, job="standby", checkpoint_dir=tmp_path / name,
                                   imds_url=imds.url, instance_id=imds.instance_id, command=STEPPER,
                                   lifecycle_hook="drain-hook", asg_name=group))
            for name, imds in (("trainer", trainer_imds), ("standby", standby_imds)))
        try:
            trainer.start().wait_for(lambda: bool(trainer.events("step")), what="the trainer's first step")
            standby.start().wait_for(lambda: any("another agent holds the job lease" in line for line in standby.lines),
                                     what="the standby waiting")
            standby_imds.set_target_lifecycle_state("Terminated")
            assert standby.wait() == 0, standby.text()
            assert trainer.process.poll() is None, "the trainer goes on"  # type: ignore[union-attr]
        finally:
            standby.stop()
            trainer.stop()
    assert standby.lines[-1] == "spot-trainer: completed lifecycle action drain-hook", standby.text()
    assert standby.events("step") == []
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "standby")
    assert [(e["instance"], e["holder"]) for e in store.events("lease_wait")] == [("i-standby", "i-trainer")]
