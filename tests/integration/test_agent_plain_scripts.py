"""Scripts as most are written (tests/fixtures/plain_scripts), nothing of Spot Trainer in them: Lightning
with no resume logic at all (`trainer.fit(model, data)`) and its default checkpointing (its file names
or the script's own), and an Accelerate loop checkpointed as the diffusers training scripts are. Under
the agent their checkpoints reach S3 and, after a power-off, the replacement resumes from the newest
instead of starting over, script unchanged. An HF Trainer script without resume logic does the same
in test_agent_own_folder.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.program.command import with_auto_resume
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env

SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures/plain_scripts"
HF_SCRIPT = Path(__file__).resolve().parents[1] / "fixtures/hf_own_folder/train.py"  # saves into outputs/
EPOCHS, EPOCH_STEPS = 20, 256  # Lightning saves once an epoch: 8192 samples in batches of 32
PLAIN = {
    "default-names": f"lightning_train.py {EPOCHS}",
    # Its files are named model-epoch=03.ckpt: the agent reads their step from the archive.
    "own-names": f"lightning_train.py {EPOCHS} 'model-{{epoch:02d}}'",
}


def instance(aws_env: dict[str, str], bucket: str, job: str, disk: Path, imds: FakeImds, script: str,
             **script_env: str) -> AgentProcess:
    """A fresh disk with the job's code unpacked and the agent's own checkpoint folder, as user data makes it."""
    shutil.copytree(SCRIPTS, disk / "work")
    env = agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=disk / "checkpoints", imds_url=imds.url,
                    instance_id=imds.instance_id, command=f"{sys.executable} {script}", workdir=str(disk / "work"))
    env["OMP_NUM_THREADS"] = "1"
    return AgentProcess(env | script_env).start()


@pytest.mark.parametrize("names", sorted(PLAIN))
def test_a_lightning_script_without_resume_logic_resumes_after_a_power_off(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, names: str
) -> None:
    script, steps = PLAIN[names], EPOCHS * EPOCH_STEPS
    job = f"plain-{names}"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    with FakeImds(instance_id="i-plain-first") as imds:
        first = instance(aws_env, bucket, job, tmp_path / "first", imds, script)
        first.power_off_when(lambda: (store.latest_step() or 0) > 0, what="a checkpoint in S3")
    in_s3 = store.latest_step()
    assert in_s3 is not None and 0 < in_s3 < steps, first.text()

    with FakeImds(instance_id="i-plain-second") as imds:
        second = instance(aws_env, bucket, job, tmp_path / "second", imds, script)
        second.run_to_the_end()
    told = r"Trainer\.fit\(\) named no checkpoint: resuming from .*/last\.ckpt,"
    assert any(re.search(told, line) for line in second.lines), second.text()
    # Its hyperparameters (an argparse.Namespace) load too: the job's own checkpoint is loaded whole.
    assert any("Restored all states from the checkpoint at" in line for line in second.lines), second.text()
    assert f"finished at global step {steps}" in second.lines, second.text()
    status = store.get_json("status.json")
    # No warning: Lightning's default checkpoints were saved where the agent looks, not in lightning_logs/.
    assert (status["state"], status["checkpoint_step"], status["warning"]) == ("DONE", steps, ""), status


@pytest.mark.parametrize(("switch", "begins_at"), [("", 50), ("off", 0)])
def test_the_resume_is_the_agents_doing_and_spot_auto_resume_off_turns_it_off(
    tmp_path: Path, switch: str, begins_at: int
) -> None:
    shutil.copy(HF_SCRIPT, tmp_path / "train.py")
    env = {**os.environ, "CHECKPOINT_DIR": str(tmp_path / "outputs"), "RESUME_FROM": "", "OMP_NUM_THREADS": "1"}
    run = [sys.executable, "train.py"]
    subprocess.run([*run, "50"], env=with_auto_resume(env), cwd=tmp_path, check=True, capture_output=True)
    env.update(RESUME_FROM=str(tmp_path / "outputs/checkpoint-50"), SPOT_AUTO_RESUME=switch)
    second = subprocess.run([*run, "60"], env=with_auto_resume(env), cwd=tmp_path, check=True, capture_output=True,
                            text=True)
    assert f"training from global step {begins_at}\n" in second.stdout, second.stdout + second.stderr
    assert ("named no checkpoint" in second.stderr) == (switch != "off"), second.stderr


# Ignores RESUME_FROM and CHECKPOINT_DIR's contents: it counts from 1 again on every instance.
FROM_SCRATCH = ('i=0; while [ "$i" -lt 100000 ]; do i=$((i+1)); sleep 0.05; echo w > "$CHECKPOINT_DIR/.t"; '
                'mv "$CHECKPOINT_DIR/.t" "$CHECKPOINT_DIR/model_step$i.pt"; done')


def test_a_command_that_starts_over_instead_of_resuming_is_named_in_status(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "from-scratch")
    for attempt in ("first", "second"):
        with FakeImds(instance_id=f"i-{attempt}") as imds:
            agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=store.job, imds_url=imds.url,
                                           checkpoint_dir=tmp_path / attempt, instance_id=imds.instance_id,
                                           command=FROM_SCRATCH)).start()
            try:
                if attempt == "first":
                    agent.wait_for(lambda: (store.latest_step() or 0) >= 20, timeout=120, what="step 20 in S3")
                else:
                    agent.wait_for(lambda: "started over" in store.get_json("status.json")["warning"],
                                   timeout=120, what="the warning that the command started over")
            finally:
                agent.stop()
    status = store.get_json("status.json")
    assert status["state"] == "TRAINING", "a warning must not stop training"
    assert re.match(r"the command started over: it saved model_step\d+\.pt \(step \d+\) after model_step(\d+)\.pt "
                    r"\(step \1\) was restored for it", status["warning"]), status["warning"]
    assert any("WARNING: the command started over" in line for line in agent.lines), agent.text()


ACCELERATE_STEPS = 3000
ACCELERATE = (f"accelerate_train.py --output_dir \"$CHECKPOINT_DIR\" --max_train_steps {ACCELERATE_STEPS} "
              "--checkpointing_steps 100 --resume_from_checkpoint latest")


def test_an_accelerate_loop_saving_as_diffusers_does_resumes_after_a_power_off(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    # Its checkpoint-<N>/ folders hold Accelerate's files (model.safetensors, optimizer.bin,
    # random_states_0.pkl), not the HF Trainer's trainer_state.json.
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "accelerate")
    with FakeImds(instance_id="i-accelerate-first") as imds:
        first = instance(aws_env, bucket, store.job, tmp_path / "first", imds, ACCELERATE)
        first.power_off_when(lambda: (store.latest_step() or 0) >= 300, timeout=90, what="step 300 in S3")
    in_s3 = store.latest_step()
    assert in_s3 is not None and in_s3 % 100 == 0 and in_s3 < ACCELERATE_STEPS, first.text()
    assert not any(".incomplete-" in line for line in first.lines), first.text()

    with FakeImds(instance_id="i-accelerate-second") as imds:
        second = instance(aws_env, bucket, store.job, tmp_path / "second", imds, ACCELERATE)
        second.run_to_the_end()
    assert f"training from global step {in_s3}" in second.lines, second.text()
    assert f"finished at global step {ACCELERATE_STEPS}" in second.lines, second.text()
    status = store.get_json("status.json")
    assert (status["state"], status["checkpoint_step"], status["warning"]) == ("DONE", ACCELERATE_STEPS, ""), status


def test_an_accelerate_loop_with_save_on_notice_loses_no_step_to_a_notice(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "accelerate-notice")
    long_run = ACCELERATE.replace(f"--max_train_steps {ACCELERATE_STEPS}", "--max_train_steps 1000000")
    with FakeImds(instance_id="i-accelerate-noticed") as imds:
        first = instance(aws_env, bucket, store.job, tmp_path / "first", imds, long_run, ACC_SAVE_ON_NOTICE="on")
        try:
            first.wait_for(lambda: max(steps(first), default=0) >= 230, timeout=120, what="step 230")
            imds.announce_interruption(in_seconds=120)
            assert first.wait(timeout=120) == 0, first.text()
        finally:
            first.stop()
    emergency = first.events("emergency_checkpoint")
    # The step in flight at the notice finished and was saved and uploaded, between two of the loop's saves.
    assert emergency and store.latest_step() == emergency[0]["step"] >= max(steps(first)) >= 230, first.text()
    assert store.get_json("status.json")["state"] == "INTERRUPTED", first.text()

    ends_at = emergency[0]["step"] + 50
    with FakeImds(instance_id="i-accelerate-replacement") as imds:
        second = instance(aws_env, bucket, store.job, tmp_path / "second", imds,
                          long_run.replace("--max_train_steps 1000000", f"--max_train_steps {ends_at}"),
                          ACC_SAVE_ON_NOTICE="on")
        second.run_to_the_end()
    assert f"training from global step {emergency[0]['step']}" in second.lines, second.text()
    assert f"finished at global step {ends_at}" in second.lines, second.text()
    assert store.get_json("status.json")["state"] == "DONE", second.text()


def steps(agent: AgentProcess) -> list[int]:
    return [event["step"] for event in agent.events("step")]
