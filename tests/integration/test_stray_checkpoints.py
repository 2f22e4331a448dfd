"""A stray `step-N` entry in CHECKPOINT_DIR must never become the job's newest step.

Before, a file `step-00000099` that nobody wrote as a checkpoint was resumed from and published; once
latest.json named step 99, every real checkpoint was refused and the job ended DONE at "step 99".
"""

from __future__ import annotations

from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.agent_runner import STEPPER, AgentProcess, agent_env

BUILTIN_ARGS = ("--model lm --synthetic --steps 30 --width 16 --context 16 --batch-size 8 "
                "--checkpoint-every-steps 10 --log-every 1")


def store_for(aws_env: dict[str, str], bucket: str, job: str) -> RemoteStore:
    return RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)


def test_builtin_trainer_ignores_stray_step_entries_before_and_during_the_run(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job, directory = f"stray-{bucket[-8:]}", tmp_path / "checkpoints"
    directory.mkdir()
    (directory / "step-00000099").write_bytes(b"not a checkpoint")
    with FakeImds(instance_id="i-stray") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=directory,
                                       imds_url=imds.url, instance_id="i-stray", command="builtin",
                                       train_args=BUILTIN_ARGS)).start()
        try:
            agent.wait_for(lambda: any(e["step"] >= 5 for e in agent.events("step")), what="step 5")
            (directory / "step-00090000").write_bytes(b"dropped in mid-run")  # no COMMITTED marker
            assert agent.wait() == 0, agent.text()
        finally:
            agent.stop()
    store = store_for(aws_env, bucket, job)
    assert store.latest_step() == 30 and max(store.remote_steps()) == 30, agent.text()
    status = store.get_json("status.json")
    assert (status["state"], status["step"]) == ("DONE", 30)
    assert min(e["step"] for e in agent.events("step")) == 1, "trained from scratch, not from the stray"
    assert any(line.startswith("spot-trainer: set aside step-00000099") for line in agent.lines), agent.text()
    assert (directory / ".unverified-step-00000099").read_bytes() == b"not a checkpoint"


def test_own_command_resumes_from_s3_not_from_an_unproven_newer_local_entry(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job, directory = f"stray-own-{bucket[-8:]}", tmp_path / "checkpoints"
    real = tmp_path / "seed" / "step-20"
    real.parent.mkdir()
    real.write_text("20\n")
    store = store_for(aws_env, bucket, job)
    assert store.upload(real, 20) is UploadOutcome.PUBLISHED
    directory.mkdir()
    (directory / "step-99").write_text("99\n")  # left behind, or planted: nothing proves it whole
    with FakeImds(instance_id="i-own") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=directory,
                                       imds_url=imds.url, instance_id="i-own", command=STEPPER)).start()
        try:
            agent.wait_for(lambda: any(e["step"] >= 25 for e in agent.events("step")), what="step 25")
            imds.announce_interruption(in_seconds=120)
            assert agent.wait() == 0, agent.text()
        finally:
            agent.stop()
    steps = [e["step"] for e in agent.events("step")]
    assert min(steps) == 21, f"resumed from S3's step 20: {steps[:3]}"
    assert store.latest_step() == max(steps) < 99
    assert 99 not in store.remote_steps()
    assert (directory / ".unverified-step-99").exists()
