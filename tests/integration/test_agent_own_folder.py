"""A Hugging Face script that saves into its own fixed folder ("outputs") and knows nothing of Spot
Trainer (tests/fixtures/hf_own_folder/train.py), under the agent as user data starts it: from the
job's working directory. It has no resume logic either: the agent's auto-resume gives its train() the
newest checkpoint.

Left to the agent's own folder it would train on and upload nothing, so the agent names the folder
and the job-file line; with `run.checkpoint_dir = "outputs"` (user data hands the agent
<workdir>/outputs) its checkpoints reach S3, a replacement resumes from them, script unchanged, and the final model it
saves beside them when it finishes is kept in S3 before the instance goes."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures/hf_own_folder"
STEPS, SAVE_EVERY = 400, 50  # as the script has them


def instance(aws_env: dict[str, str], bucket: str, job: str, disk: Path, imds: FakeImds, checkpoints: str,
             steps: int = STEPS) -> AgentProcess:
    """One instance: a fresh disk with the job's code unpacked, the agent started as user data starts it."""
    workdir = disk / "work"
    shutil.copytree(SCRIPT, workdir)
    checkpoint_dir = workdir / checkpoints if not checkpoints.startswith("/") else Path(checkpoints)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    env = agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=checkpoint_dir, imds_url=imds.url,
                    instance_id=imds.instance_id, command=f"{sys.executable} train.py {steps}", workdir=str(workdir))
    env["OMP_NUM_THREADS"] = "1"
    return AgentProcess(env).start()


@pytest.fixture
def store(aws_env: dict[str, str], bucket: str, request: pytest.FixtureRequest) -> RemoteStore:
    job = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:32].strip("-")
    return RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)


def test_saves_in_a_folder_of_its_own_are_named_with_the_job_file_line_that_fixes_them(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, store: RemoteStore
) -> None:
    with FakeImds(instance_id="i-own-folder") as imds:
        agent = instance(aws_env, bucket, store.job, tmp_path, imds, str(tmp_path / "agent-folder"), steps=10**6)
        try:  # named while it trains, at the next look after its first save, not when it ends
            # status.json, not the log: the agent logs the warning a moment before it publishes it
            agent.wait_for(lambda: "run.checkpoint_dir" in (store.get_json("status.json") or {}).get("warning", ""),
                           timeout=180, what="the warning naming the script's own folder, in status.json")
            assert store.get_json("status.json")["state"] == "TRAINING", "a warning must not stop training"
        finally:
            agent.stop()
    warning = store.get_json("status.json")["warning"]
    assert f"saves its checkpoints in {tmp_path / 'work/outputs'} (checkpoint-" in warning, warning
    assert 'Set run.checkpoint_dir = "outputs" in the job file' in warning, warning
    assert store.latest_step() is None  # true to what happened: nothing of it reached S3


def test_with_the_folder_named_in_the_job_file_it_resumes_after_a_power_off_unchanged(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, store: RemoteStore
) -> None:
    with FakeImds(instance_id="i-first") as imds:
        first = instance(aws_env, bucket, store.job, tmp_path / "a", imds, "outputs")
        first.power_off_when(lambda: (store.latest_step() or 0) >= SAVE_EVERY, what="its first checkpoint in S3")
    in_s3 = store.latest_step()
    assert in_s3 is not None and in_s3 % SAVE_EVERY == 0 and in_s3 < STEPS, first.text()

    with FakeImds(instance_id="i-second") as imds:
        second = instance(aws_env, bucket, store.job, tmp_path / "b", imds, "outputs")
        second.run_to_the_end()
    assert f"training from global step {in_s3}" in second.lines, second.text()
    assert f"finished at global step {STEPS}" in second.lines, second.text()
    status = store.get_json("status.json")
    assert (status["state"], status["checkpoint_step"], status["warning"]) == ("DONE", STEPS, "")
    # The final model save_model() wrote beside the checkpoints outlives the instance; checkpoints stay theirs.
    final = {key.removeprefix(f"{store.job}/final/") for key in keys(store, "final/")}
    assert {"model.safetensors", "config.json"} <= final, final
    assert not any(name.startswith("checkpoint-") for name in final), final
    (kept,) = store.events("final_outputs")
    assert kept["location"] == f"s3://{store.bucket}/{store.job}/final/" and kept["files"] == len(final)


def keys(store: RemoteStore, prefix: str) -> list[str]:
    listed = store.s3.list_objects_v2(Bucket=store.bucket, Prefix=store.key(prefix))
    return [item["Key"] for item in listed.get("Contents", [])]


def test_a_command_that_saves_nothing_is_named_once_the_job_s_own_wait_has_passed(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, store: RemoteStore
) -> None:
    """run.save_warn_seconds (SPOT_SAVE_WARN_SECONDS): a job whose first save comes late waits longer."""
    with FakeImds(instance_id="i-saves-nothing") as imds:
        env = agent_env(aws_env, bucket=bucket, job=store.job, checkpoint_dir=tmp_path / "checkpoints",
                        imds_url=imds.url, instance_id=imds.instance_id, command="sleep 120", save_warn_seconds="3")
        agent = AgentProcess(env).start()
        try:
            agent.wait_for(lambda: "no recognised checkpoint after" in
                           (store.get_json("status.json") or {}).get("warning", ""),
                           timeout=30, what="the nothing-saved warning, 3 s into training")
        finally:
            agent.stop()
    assert "not a setting this agent reads" not in agent.text()
