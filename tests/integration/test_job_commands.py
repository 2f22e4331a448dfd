"""The job commands against moto: a job found by its stack's outputs, and every bad input or bad state
answered in one line on stderr with nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from localcloud.moto_server import MotoServer
from spot_trainer.__main__ import main
from tests.conftest import REPO_ROOT

MIB = 1024 * 1024


@dataclass
class Job:
    name: str
    bucket: str
    group: str
    env: dict[str, str]

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name="us-east-1", endpoint_url=self.env["AWS_ENDPOINT_URL"])


def spot_trainer(env: dict[str, str], *args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spot_trainer", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process (the environment is moto's, see user_env): as the subprocess would say it."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out, err)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.fixture
def user_env(aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPOT_"))}, **aws_env,
            "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def deployed(moto_server: MotoServer) -> Iterator[Job]:
    """A stack with the outputs a Spot Trainer stack has, its bucket, and a group that wants two instances;
    made once for the module (each test sets its own state: see `job`)."""
    env = {**moto_server.env(), "AWS_REGION": "us-east-1"}
    name = f"j{uuid.uuid4().hex[:8]}"
    bucket, group = f"ckpt-{name}", f"spot-trainer-{name}"
    aws = {"region_name": "us-east-1", "endpoint_url": env["AWS_ENDPOINT_URL"],
           "aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"]}
    ec2, autoscaling = boto3.client("ec2", **aws), boto3.client("autoscaling", **aws)
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    image = ec2.describe_images()["Images"][0]["ImageId"]
    ec2.create_launch_template(LaunchTemplateName=group, LaunchTemplateData={"ImageId": image})
    autoscaling.create_auto_scaling_group(AutoScalingGroupName=group, MinSize=0, MaxSize=2, DesiredCapacity=2,
                                          LaunchTemplate={"LaunchTemplateName": group}, VPCZoneIdentifier=subnet)
    template = {"Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": bucket}}},
                "Outputs": {"CheckpointBucket": {"Value": {"Ref": "Bucket"}}, "AutoScalingGroup": {"Value": group},
                            "LogGroup": {"Value": f"/spot-trainer/{name}"}}}
    cloudformation = boto3.client("cloudformation", **aws)
    cloudformation.create_stack(StackName=f"SpotTrainer-{name}", TemplateBody=json.dumps(template))
    yield Job(name, bucket, group, env)
    cloudformation.delete_stack(StackName=f"SpotTrainer-{name}")
    autoscaling.delete_auto_scaling_group(AutoScalingGroupName=group, ForceDelete=True)


@pytest.fixture
def job(deployed: Job, user_env: dict[str, str]) -> Job:
    """The deployed job as a test finds it: the group wanting two, nothing under its prefix."""
    job = Job(deployed.name, deployed.bucket, deployed.group, user_env)
    job.client("autoscaling").set_desired_capacity(AutoScalingGroupName=job.group, DesiredCapacity=2)
    listed = job.client("s3").list_objects_v2(Bucket=job.bucket, Prefix=f"{job.name}/").get("Contents", [])
    for item in listed:
        job.client("s3").delete_object(Bucket=job.bucket, Key=item["Key"])
    return job


def desired(job: Job) -> int:
    groups = job.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[job.group])
    return int(groups["AutoScalingGroups"][0]["DesiredCapacity"])


def put_status(job: Job, state: str) -> None:
    job.client("s3").put_object(Bucket=job.bucket, Key=f"{job.name}/status.json",
                                Body=json.dumps({"job": job.name, "state": state}).encode())


def test_pause_then_resume_moves_the_group_and_records_both(job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    put_status(job, "TRAINING")
    assert run(capsys, "pause", "--job", job.name).returncode == 0
    assert desired(job) == 0
    assert run(capsys, "resume", "--job", job.name).returncode == 0
    assert desired(job) == 2  # the group's most: the job's nodes
    keys = [o["Key"] for o in job.client("s3").list_objects_v2(
        Bucket=job.bucket, Prefix=f"{job.name}/events/")["Contents"]]
    assert [k.rsplit("-", 1)[1] for k in sorted(keys)] == ["paused.json", "resumed.json"]


def test_a_done_job_is_not_paused(job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    put_status(job, "DONE")
    result = run(capsys, "pause", "--job", job.name)
    assert result.returncode == 1 and one_line(result) == (
        f"spot-trainer pause: job '{job.name}' is DONE: there is nothing to pause")
    assert desired(job) == 2


def test_a_done_job_whose_end_took_the_group_to_zero_is_not_resumed(job: Job,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    put_status(job, "DONE")
    job.client("autoscaling").set_desired_capacity(AutoScalingGroupName=job.group, DesiredCapacity=0)
    result = run(capsys, "resume", "--job", job.name)
    assert result.returncode == 1 and one_line(result) == (
        f"spot-trainer resume: job '{job.name}' is DONE: there is nothing to resume")
    assert desired(job) == 0


def test_status_of_a_done_job_at_zero_offers_no_resume(job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    put_status(job, "DONE")
    job.client("autoscaling").set_desired_capacity(AutoScalingGroupName=job.group, DesiredCapacity=0)
    result = run(capsys, "status", "--job", job.name)
    assert result.returncode == 0, result.stderr
    assert "group: wants 0 instances (the job is DONE)" in result.stdout and "resume" not in result.stdout


def test_a_running_job_is_not_resumed(job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    put_status(job, "TRAINING")
    result = run(capsys, "resume", "--job", job.name)
    assert result.returncode == 1 and "is not paused: its group wants 2 instance(s)" in one_line(result)


def test_no_stack_of_that_name_is_one_line(user_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("status", "logs", "pause", "resume", "outputs"):
        result = run(capsys, command, "--job", "nosuchjob")
        assert result.returncode == 2 and one_line(result) == (
            f"spot-trainer {command}: no stack SpotTrainer-nosuchjob in us-east-1: deploy it with "
            "`npx cdk deploy -c job=nosuchjob`, or give --bucket for a job whose stack is gone"), command


def test_a_stack_being_created_is_one_line(user_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    cloudformation = boto3.client("cloudformation", region_name="us-east-1", endpoint_url=user_env["AWS_ENDPOINT_URL"])
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    cloudformation.create_change_set(StackName="SpotTrainer-creating", ChangeSetName="first", ChangeSetType="CREATE",
                                     TemplateBody=json.dumps(template))
    try:
        result = run(capsys, "status", "--job", "creating")
        assert result.returncode == 2 and one_line(result) == (
            "spot-trainer status: stack SpotTrainer-creating is being created (REVIEW_IN_PROGRESS); "
            "try again once it is CREATE_COMPLETE")
    finally:
        cloudformation.delete_stack(StackName="SpotTrainer-creating")


def test_no_credentials_is_one_line(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPOT_"))}, "HOME": str(tmp_path),
           "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # never reached: no request is signed without credentials
    result = spot_trainer(env, "pause", "--job", "cifar")
    assert result.returncode == 2 and one_line(result) == (
        "spot-trainer pause: no AWS credentials found: run `aws configure`, or set AWS_PROFILE or "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")


def test_a_download_folder_that_is_not_empty_is_refused_untouched(job: Job, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    job.client("s3").put_object(Bucket=job.bucket, Key=f"{job.name}/final/model.bin", Body=b"weights")
    mine = tmp_path / "mine.txt"
    mine.write_text("keep me")
    result = run(capsys, "outputs", "--job", job.name, "--to", str(tmp_path))
    assert result.returncode == 2 and one_line(result) == (
        f"spot-trainer outputs: {tmp_path} is not empty: name an empty or new folder to download into with --to FOLDER")
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"] and mine.read_text() == "keep me"


def test_final_outputs_download_checked_against_s3(job: Job, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """One object in one PUT, one in 8 MiB parts (as the agent uploads large files): both checked."""
    s3 = job.client("s3")
    big = os.urandom(17 * MIB + 5)
    s3.put_object(Bucket=job.bucket, Key=f"{job.name}/final/metrics.json", Body=b'{"loss": 0.1}')
    (tmp_path / "big").write_bytes(big)
    config = boto3.s3.transfer.TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB)
    s3.upload_file(str(tmp_path / "big"), job.bucket, f"{job.name}/final/model/weights.bin", Config=config)
    target = tmp_path / "out"
    result = run(capsys, "outputs", "--job", job.name, "--to", str(target))
    assert result.returncode == 0, result.stderr
    assert (target / "model/weights.bin").read_bytes() == big
    assert (target / "metrics.json").read_bytes() == b'{"loss": 0.1}'
    assert result.stdout.strip() == (f"2 final output file(s) of job '{job.name}' in {target}, each checked "
                                     "against S3's ETag")


def test_a_job_with_no_final_outputs_says_so(job: Job, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "outputs", "--job", job.name, "--to", str(tmp_path / "out"))
    assert result.returncode == 1 and "has no final outputs" in one_line(result)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("name", "message"), [
    ("life.png", "--plot {path}: give a file name ending in .svg (one standalone picture)"),
    ("nowhere/life.svg", "--plot {path}: there is no folder {folder} to write it into"),
])
def test_a_plot_that_cannot_be_written_is_one_line_before_anything_is_read(
        user_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str) -> None:
    path = tmp_path / name
    result = run(capsys, "status", "--job", "nosuchjob", "--plot", str(path))  # no stack either: the plot is first
    assert result.returncode == 2 and one_line(result) == (
        "spot-trainer status: " + message.format(path=path, folder=path.parent))
    assert result.stdout == "" and not path.exists()


def test_a_job_whose_stack_is_gone_is_read_by_its_bucket(user_env: dict[str, str], bucket: str, s3: Any,
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s3.put_object(Bucket=bucket, Key="gone/final/model.bin", Body=b"weights")
    missing = run(capsys, "outputs", "--job", "gone", "--to", str(tmp_path / "a"))
    assert missing.returncode == 2 and "no stack" in one_line(missing) and "give --bucket" in one_line(missing)
    found = run(capsys, "outputs", "--job", "gone", "--bucket", bucket, "--to", str(tmp_path / "b"))
    assert found.returncode == 0, found.stderr
    assert (tmp_path / "b" / "model.bin").read_bytes() == b"weights"
