"""A command that keeps failing, bad settings and unreachable storage end clearly and stop paying."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.node.endings import EXIT_FAILED
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import REPO_ROOT, AgentProcess, agent_env
from tests.integration.fleet import create_group, desired_capacity


def test_crash_looping_command_fails_after_the_budget_and_scales_to_zero(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    group = f"fleet-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group)
    command = ('echo "attempt $JOB_ATTEMPT starting"; '
               'echo "CUDA error: out of memory (attempt $JOB_ATTEMPT)" >&2; exit 3')
    with FakeImds(instance_id="i-crash") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job="crash", checkpoint_dir=tmp_path / "c",
                                       imds_url=imds.url, instance_id="i-crash", command=command,
                                       restart_budget="3", asg_name=group)).start()
        try:
            assert agent.wait() == EXIT_FAILED, agent.text()
        finally:
            agent.stop()
    assert [line for line in agent.lines if line.endswith(" starting")] == [
        "attempt 1 starting", "attempt 2 starting", "attempt 3 starting"]
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "crash")
    status = store.get_json("status.json")
    assert status["state"] == "FAILED" and status["failures"] == 3
    assert status["reason"] == "command exited with code 3: CUDA error: out of memory (attempt 3)"
    assert [e["kind"] for e in store.events()] == ["start", "boot", "failure", "failure", "failure", "failed"]
    assert desired_capacity(autoscaling, group) == 0


def run_agent_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spot_trainer", "agent", *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


BAD_SETTINGS = [
    ("SPOT_BUCKET", "", "missing required setting SPOT_BUCKET (agent environment file)"),
    ("SPOT_GRACE_SECONDS", "ninety", "SPOT_GRACE_SECONDS='ninety' is not a valid finite number"),
    ("SPOT_GRACE_SECONDS", "inf", "SPOT_GRACE_SECONDS='inf' is not a valid finite number"),
    ("SPOT_STOP_SIGNAL", "SIGNOPE", "SPOT_STOP_SIGNAL='SIGNOPE' is not a signal name"),
    ("SPOT_RESTART_BUDGET", "-1", "SPOT_RESTART_BUDGET=-1 is out of range"),
    ("SPOT_LEASE_TTL_SECONDS", "0.3",
     "SPOT_LEASE_TTL_SECONDS=0.3 is out of range (must exceed twice SPOT_POLL_SECONDS)"),
    ("SPOT_WORKDIR", "/nonexistent/dir", "SPOT_WORKDIR='/nonexistent/dir' is not a directory"),
    ("SPOT_TRAIN_ARGS", "\"--model 'lm\"", "SPOT_TRAIN_ARGS: cannot be parsed as shell words"),
    ("SPOT_TRAIN_ARGS", "\"--model lm --synthetic --steps abc\"", "SPOT_TRAIN_ARGS: argument --steps: invalid"),
    ("SPOT_NOTIFY_TOPIC", "my-topic", "SPOT_NOTIFY_TOPIC='my-topic' is not an SNS topic ARN"),
    ("SPOT_CHECKPOINT_DIR", "{file}/checkpoints", "is not a writable directory (Not a directory)"),
    ("SPOT_KEEP_CHECKPOINTS", "'3", "agent.env:6: SPOT_KEEP_CHECKPOINTS: a quote is never closed"),
    ("SPOT_REGION", "\udcff\udcfe", "agent.env is not UTF-8 text"),
]


@pytest.mark.parametrize(("setting", "value", "message"), BAD_SETTINGS, ids=[s for s, _, _ in BAD_SETTINGS])
def test_bad_setting_is_one_line_ends_the_job_failed_and_stops_paying(
    setting: str, value: str, message: str, aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    group = f"bad-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group)
    (tmp_path / "file").write_text("not a directory")
    command = "builtin" if setting == "SPOT_TRAIN_ARGS" else "'python train.py'"
    lines = [f"SPOT_JOB=job\nSPOT_BUCKET={bucket}\nSPOT_COMMAND={command}\nSPOT_ASG_NAME={group}",
             f"SPOT_CHECKPOINT_DIR={tmp_path / 'c'}", f"{setting}={value.format(file=tmp_path / 'file')}"]
    env_file = tmp_path / "agent.env"
    env_file.write_bytes("\n".join(lines).encode(errors="surrogateescape") + b"\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("SPOT_")}
    result = run_agent_cli({**env, **aws_env}, "--env-file", str(env_file))
    assert result.returncode == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith("spot-trainer: bad configuration: ") and message in first, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert desired_capacity(autoscaling, group) == 0, "a job that cannot run must not keep an instance"
    if setting != "SPOT_BUCKET":
        status = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "job")
        record = status.get_json("status.json")
        assert record is not None and record["state"] == "FAILED" and message in record["reason"]


def test_a_misspelt_setting_is_said_in_the_log_and_the_job_still_runs(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    env_file = tmp_path / "agent.env"
    env_file.write_text("SPOT_REGOIN=us-west-2\nSPOT_GRACE_SECOND=30\n")
    with FakeImds(instance_id="i-typo") as imds:
        env = agent_env(aws_env, bucket=bucket, job="typo", checkpoint_dir=tmp_path / "c", imds_url=imds.url,
                        instance_id="i-typo", command="true")
        result = run_agent_cli(env, "--env-file", str(env_file))
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line and "not a setting" in line]
    assert [line.split("WARNING: ", 1)[1] for line in warnings] == [
        "SPOT_REGOIN is not a setting this agent reads (did you mean SPOT_REGION?); it is ignored",
        "SPOT_GRACE_SECOND is not a setting this agent reads (did you mean SPOT_GRACE_SECONDS?); it is ignored"]
    record = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "typo")
    assert record.get_json("status.json")["state"] == "DONE"


def test_unknown_bucket_is_one_line_and_nothing_runs(aws_env: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with FakeImds(instance_id="i-nobucket") as imds:
        env = agent_env(aws_env, bucket="no-such-bucket-anywhere", job="job", checkpoint_dir=tmp_path / "c",
                        imds_url=imds.url, instance_id="i-nobucket", command=f"touch {marker}")
        result = subprocess.run([sys.executable, "-m", "spot_trainer", "agent"], env=env, cwd=REPO_ROOT,
                                capture_output=True, text=True, timeout=120)
    lines = [line for line in result.stderr.strip().splitlines() if "cannot work with" in line]
    assert result.returncode == EXIT_FAILED, "no restart can create the bucket: systemd must not retry"
    assert lines and lines[0].startswith("spot-trainer: cannot work with s3://no-such-bucket-anywhere/job: ")
    assert "NoSuchBucket" in lines[0] and "Traceback" not in result.stderr
    assert not marker.exists()


def run_status_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spot_trainer", "status", *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)


def test_status_command_summarises_the_job(aws_env: dict[str, str], bucket: str) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "report")
    store.put_json("status.json", {"job": "report", "state": "INTERRUPTED", "step": 120, "loss": 0.5,
                                   "instance": "i-1", "attempt": 2, "interruptions": 1,
                                   "updated_at": "2026-11-22T10:00:00+00:00"})
    store.append_event("interruption", step=120)
    env = {**os.environ, **aws_env}
    result = run_status_cli(env, "--job", "report", "--bucket", bucket)
    assert result.returncode == 0, result.stderr
    assert "state          INTERRUPTED" in result.stdout and "interruptions  1" in result.stdout
    assert "events         interruption 1" in result.stdout
    missing = run_status_cli(env, "--job", "xy", "--bucket", "no-such-bkt")
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
    assert missing.stderr.startswith("spot-trainer: cannot read job 'xy' in bucket 'no-such-bkt'")


@pytest.mark.parametrize("bucket", ["Bad_Bucket!", "my..bucket", "192.168.5.4", "ab"])
def test_status_with_a_malformed_bucket_name_is_one_line(bucket: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SPOT_")}
    result = run_status_cli(env, "--job", "xy", "--bucket", bucket)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"spot-trainer: --bucket {bucket!r} is not an S3 bucket name ")


@pytest.mark.parametrize("body", [b"[1, 2]", b"null", b'"DONE"'])
def test_status_over_a_record_that_is_not_an_object_is_one_line(aws_env: dict[str, str], bucket: str,
                                                                body: bytes) -> None:
    boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]).put_object(
        Bucket=bucket, Key="odd/status.json", Body=body)
    result = run_status_cli({**os.environ, **aws_env}, "--job", "odd", "--bucket", bucket)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "odd/status.json: expected a JSON object" in lines[0], result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--job", "", "--bucket", "some-bucket"], "--job '' is not a job name"),
    (["--job", "xy", "--bucket", "some-bucket", "--region", "us-east-1 "],
     "--region 'us-east-1 ' is not an AWS region"),
    (["--job", "xy", "--bucket", "some-bucket", "--region", "mars"], "--region 'mars' is not an AWS region"),
])
def test_status_with_a_malformed_job_or_region_is_one_line(args: list[str], message: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SPOT_")}
    result = run_status_cli(env, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and message in lines[0], result.stderr
