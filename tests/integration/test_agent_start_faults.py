"""Failures at the agent's start that no restart mends end the job in one line: FAILED with the reason in
status.json, a notification, the group at zero and the checkpoints kept, instead of systemd restarting the
agent every few seconds with nothing said. Each start is run as the unit runs it (`--env-file`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.node.endings import EXIT_FAILED
from spot_trainer.agent.records.failed_starts import FILE_NAME, SAME_FAILURES
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.conftest import REPO_ROOT
from tests.integration.agent_runner import agent_env, create_log_group
from tests.integration.fleet import create_group, desired_capacity
from tests.integration.remote_helpers import MB, make_checkpoint
from tests.integration.test_agent_notifications import inbox, received
from tests.support.tiny_fs import tiny_tmpfs

__all__ = ["inbox"]  # the job's topic with a queue subscribed, shared with the notifications' tests


def start_agent(env: dict[str, str], etc: Path) -> subprocess.CompletedProcess[str]:
    """One start of the agent as systemd makes it, its settings file in `etc` (empty: the environment holds them)."""
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "agent.env").touch()
    create_log_group(env)
    return subprocess.run([sys.executable, "-P", "-m", "spot_trainer", "agent", "--env-file", str(etc / "agent.env")],
                          env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)


def ended(aws_env: dict[str, str], bucket: str, job: str) -> dict[str, Any]:
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    status = RemoteStore(s3, bucket, job).get_json("status.json")
    assert status is not None
    return status


def lines_naming(result: subprocess.CompletedProcess[str], text: str) -> list[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if text in line]


def test_a_secret_scheduled_for_deletion_ends_the_job_in_one_line(
        aws_env: dict[str, str], bucket: str, tmp_path: Path, inbox: tuple[str, Any, str]) -> None:
    topic, sqs, queue = inbox
    manager = boto3.client("secretsmanager", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    manager.create_secret(Name=f"{bucket}-wandb", SecretString="value")
    manager.delete_secret(SecretId=f"{bucket}-wandb", RecoveryWindowInDays=7)  # the default way: recoverable
    group = f"fleet-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group)
    with FakeImds(instance_id="i-secret") as imds:
        result = start_agent(agent_env(aws_env, bucket=bucket, job="sec", checkpoint_dir=tmp_path / "c",
                                       imds_url=imds.url, instance_id="i-secret", command="echo never",
                                       secrets=f"WANDB_API_KEY=secretsmanager:{bucket}-wandb", asg_name=group,
                                       region="us-east-1", notify_topic=topic), tmp_path / "etc")
    assert result.returncode == EXIT_FAILED, result.stderr
    said = lines_naming(result, "WANDB_API_KEY")
    assert len(said) == 1 and said[0].endswith(
        f"secret WANDB_API_KEY (secretsmanager:{bucket}-wandb) cannot be read: InvalidRequestException (it is "
        "scheduled for deletion or cannot be read in its state: restore it (aws secretsmanager restore-secret) or "
        "name another)"), result.stderr
    status = ended(aws_env, bucket, "sec")
    assert status["state"] == "FAILED" and "InvalidRequestException" in status["reason"]
    assert desired_capacity(autoscaling, group) == 0
    assert [m["Subject"] for m in received(sqs, queue)] == ["Spot Trainer sec: FAILED"]


def test_a_restore_into_a_disk_too_small_ends_the_job_and_keeps_the_checkpoint(
        aws_env: dict[str, str], bucket: str, tmp_path: Path, inbox: tuple[str, Any, str]) -> None:
    topic, sqs, queue = inbox
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    store = RemoteStore(s3, bucket, "small")
    local = make_checkpoint(tmp_path / "local", 20, sizes={"model.pt": 3 * MB})
    assert store.upload(local, 20) is UploadOutcome.PUBLISHED
    kept = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="small/checkpoints/")["Contents"])
    group = f"fleet-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group)
    with tiny_tmpfs(tmp_path / "disk", inodes=256, size="1m") as disk, FakeImds(instance_id="i-small") as imds:
        result = start_agent(agent_env(aws_env, bucket=bucket, job="small", checkpoint_dir=disk / "c",
                                       imds_url=imds.url, instance_id="i-small", command="echo never",
                                       asg_name=group, region="us-east-1", notify_topic=topic), tmp_path / "etc")
    assert result.returncode == EXIT_FAILED, result.stderr
    said = lines_naming(result, "No space left on device")
    assert len(said) == 1 and "cannot restore checkpoint step 20 into" in said[0], result.stderr
    assert said[0].endswith("this instance's disk is too small for it, and a replacement's is the same: raise "
                            "capacity.volume_size (VolumeSize), then set the group's desired capacity back; the "
                            "checkpoints in S3 are kept"), said[0]
    status = ended(aws_env, bucket, "small")
    assert status["state"] == "FAILED" and "No space left on device" in status["reason"]
    assert desired_capacity(autoscaling, group) == 0
    assert [m["Subject"] for m in received(sqs, queue)] == ["Spot Trainer small: FAILED"]
    assert store.get_json("latest.json")["step"] == 20
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="small/checkpoints/")["Contents"]) == kept


def test_the_same_failure_at_every_start_ends_the_job_at_the_bound(
        aws_env: dict[str, str], bucket: str, tmp_path: Path) -> None:
    """Parameter Store not answering (a restart may get past that): exit 1 for systemd to restart the agent,
    until the same line has ended SAME_FAILURES starts in a row."""
    group = f"fleet-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group)
    etc = tmp_path / "etc"
    with FakeImds(instance_id="i-loop") as imds:
        env = {**agent_env(aws_env, bucket=bucket, job="loop", checkpoint_dir=tmp_path / "c", imds_url=imds.url,
                           instance_id="i-loop", command="echo never", secrets="HF_TOKEN=ssm:/team/hf",
                           asg_name=group, region="us-east-1"),
               "AWS_ENDPOINT_URL_SSM": "http://127.0.0.1:9"}  # nothing listens there
        first = start_agent(env, etc)
        assert first.returncode == 1, first.stderr
        counted = json.loads((etc / FILE_NAME).read_text())
        assert counted["count"] == 1 and "secret HF_TOKEN (ssm:/team/hf) cannot be read" in counted["message"]
        (etc / FILE_NAME).write_text(json.dumps({**counted, "count": SAME_FAILURES - 1}))
        last = start_agent(env, etc)
    assert last.returncode == EXIT_FAILED, last.stderr
    said = lines_naming(last, "HF_TOKEN")
    assert len(said) == 1 and said[0].endswith(
        f"(the agent failed so at {SAME_FAILURES} starts in a row: a restart does not mend it)"), last.stderr
    status = ended(aws_env, bucket, "loop")
    assert status["state"] == "FAILED" and counted["message"] in status["reason"]
    assert desired_capacity(autoscaling, group) == 0

