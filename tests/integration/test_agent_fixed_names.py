"""A script that keeps one `ckpt.pt` and rewrites it in place (tests/fixtures/plain_scripts/fixed_ckpt.py, the
nanoGPT habit), unmodified, under the agent: through a power-off, a power-off in the middle of its
torch.save and a notice its plain loop does not handle, every replacement resumes within one save interval
(and 3 s of steps) of where the lost instance was, from a whole version, and the job ends DONE."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import boto3
import torch

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.checkpoint_versions import is_version
from spot_trainer.storage.files.whole_files import zip_whole
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env

SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures/plain_scripts"
ITERS, SAVE_EVERY, STEP_SECONDS = 420, 30, 0.1  # a save every 3 s: each lies still the 2 s the rule waits
WITHIN = SAVE_EVERY + round(3 / STEP_SECONDS)  # one save interval and 3 s of steps
COMMAND = f'{sys.executable} fixed_ckpt.py {ITERS} {SAVE_EVERY} $([ -f "$CHECKPOINT_DIR/ckpt.pt" ] && echo --resume)'


def instance(aws_env: dict[str, str], bucket: str, job: str, disk: Path, imds: FakeImds, *,
             command: str = COMMAND, **script_env: str) -> AgentProcess:
    shutil.copytree(SCRIPTS, disk / "work")
    env = agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=disk / "out", imds_url=imds.url,
                    instance_id=imds.instance_id, command=command, workdir=str(disk / "work"))
    env.update(OMP_NUM_THREADS="1", STEP_SECONDS=str(STEP_SECONDS), WHERE_FILE=str(disk / "where"))
    return AgentProcess(env | script_env).start()


def where(disk: Path) -> int:
    """The iteration the script had reached on a lost instance's disk."""
    return int((disk / "where").read_text())


def resumed_at(agent: AgentProcess) -> int:
    return next(int(line.rsplit(" ", 1)[1]) for line in agent.lines if line.startswith("resuming from iter "))


def test_a_fixed_ckpt_pt_resumes_within_one_save_after_power_offs_a_torn_save_and_a_notice(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "fixed-ckpt")
    first = tmp_path / "first"
    with FakeImds(instance_id="i-fixed-first") as imds:
        agent = instance(aws_env, bucket, store.job, first, imds)
        agent.power_off_when(lambda: (store.latest_step() or 0) >= 2 * SAVE_EVERY, what="iter 60 in S3")
    assert store.latest_step() in range(2 * SAVE_EVERY, ITERS, SAVE_EVERY), agent.text()

    # The replacement resumes; then it is powered off while its torch.save is half written.
    second = tmp_path / "second"
    with FakeImds(instance_id="i-fixed-second") as imds:
        agent = instance(aws_env, bucket, store.job, second, imds, SAVE_SECONDS="1.5")
        torn = second / "out" / "ckpt.pt"

        def mid_save() -> bool:
            return (store.latest_step() or 0) > resumed_at(agent) if any(
                line.startswith("resuming from") for line in agent.lines) else False

        agent.wait_for(mid_save, timeout=120, what="a version past the restored one in S3")
        agent.power_off_when(lambda: torn.exists() and not zip_whole(torn), what="ckpt.pt half written")
    assert 0 <= where(first) - resumed_at(agent) <= WITHIN, (where(first), agent.text())
    assert not zip_whole(torn), "powered off mid-save: the only local copy is torn"
    whole_in_s3 = store.latest_step()

    # The next restores the last whole version, and a notice ends its plain loop (SIGTERM, exit 143).
    third = tmp_path / "third"
    with FakeImds(instance_id="i-fixed-third") as imds:
        agent = instance(aws_env, bucket, store.job, third, imds)
        try:
            agent.wait_for(lambda: (store.latest_step() or 0) > (whole_in_s3 or 0), timeout=120,
                           what="a version past the restored one in S3")
            imds.announce_interruption(in_seconds=120)
            agent.wait(timeout=150)
        finally:
            agent.stop()
    assert resumed_at(agent) == whole_in_s3, agent.text()
    assert 0 <= where(second) - resumed_at(agent) <= WITHIN + round(1.5 / STEP_SECONDS), agent.text()

    fourth = tmp_path / "fourth"
    with FakeImds(instance_id="i-fixed-fourth") as imds:
        agent = instance(aws_env, bucket, store.job, fourth, imds)
        agent.run_to_the_end()
    assert 0 <= where(third) - resumed_at(agent) <= WITHIN, agent.text()
    assert f"finished at iter {ITERS}" in agent.lines, agent.text()
    status = store.get_json("status.json")
    assert (status["state"], status["checkpoint_step"]) == ("DONE", ITERS), status


EPOCHS, EPOCH_STEPS = 12, 30  # an epoch every 3 s
IMAGENET = (f'{sys.executable} imagenet_style.py {EPOCHS} {EPOCH_STEPS} '
            '$([ -f "$CHECKPOINT_DIR/checkpoint.pth.tar" ] && echo --resume "$CHECKPOINT_DIR/checkpoint.pth.tar")')


def test_the_imagenet_example_s_pair_comes_back_together_and_resumes_with_resume_path(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "imagenet-style")
    first = tmp_path / "first"
    with FakeImds(instance_id="i-imagenet-first") as imds:
        agent = instance(aws_env, bucket, store.job, first, imds, command=IMAGENET)
        agent.power_off_when(lambda: (store.latest_step() or 0) >= 4, what="epoch 4 in S3")
    in_s3 = store.latest_step()
    second = tmp_path / "second"
    with FakeImds(instance_id="i-imagenet-second") as imds:
        agent = instance(aws_env, bucket, store.job, second, imds, command=IMAGENET)
        agent.wait_for(lambda: any("=> loaded checkpoint" in line for line in agent.lines), timeout=120,
                       what="the script's resume")
        restored_best = torch.load(second / "out" / "model_best.pth.tar", weights_only=False)["epoch"]
        agent.run_to_the_end()
    assert f"=> loaded checkpoint '{second}/out/checkpoint.pth.tar' (epoch {in_s3})" in agent.lines, agent.text()
    assert 0 <= where(first) - (in_s3 or 0) <= 2, "within one save (an epoch) and 3 s of work"
    # model_best.pth.tar came back as the script had left it at that save: the best is every third epoch's.
    assert restored_best == max(epoch + 1 for epoch in range(in_s3 or 0) if epoch % 3 == 0), restored_best
    assert f"finished at epoch {EPOCHS}" in agent.lines, agent.text()
    assert store.get_json("status.json")["state"] == "DONE"


KERAS_EPOCHS, EPOCH_SECONDS = 10, 3.0  # each save lies still the 2 s the rule waits
KERAS = f"{sys.executable} keras_fixed.py {KERAS_EPOCHS}"


def test_a_keras_model_saved_over_itself_goes_up_by_version_and_every_line_says_the_step_is_unknown(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "keras-fixed")
    first = tmp_path / "first"
    with FakeImds(instance_id="i-keras-first") as imds:
        agent = instance(aws_env, bucket, store.job, first, imds, command=KERAS, EPOCH_SECONDS=str(EPOCH_SECONDS))
        agent.power_off_when(lambda: (where(first) if (first / "where").exists() else 0) >= 4, what="epoch 4")
    version = store.latest_step()
    assert is_version(version), agent.text()
    assert any(re.search(r"checkpoint version \S+ \(step unknown\) uploaded", line) for line in agent.lines)
    second = tmp_path / "second"
    with FakeImds(instance_id="i-keras-second") as imds:
        agent = instance(aws_env, bucket, store.job, second, imds, command=KERAS, EPOCH_SECONDS=str(EPOCH_SECONDS))
        agent.run_to_the_end()
    resumed = next(int(line.rsplit(" ", 1)[1]) for line in agent.lines if line.startswith("resuming from epoch "))
    assert 0 <= where(first) - resumed <= 1 + round(3 / EPOCH_SECONDS), (where(first), agent.text())
    assert f"finished at epoch {KERAS_EPOCHS}" in agent.lines, agent.text()
    assert any(re.search(r"training finished at checkpoint version \S+ \(step unknown\)", line)
               for line in agent.lines), agent.text()
    assert not any("step 17" in line for line in agent.lines), "a version is never shown as a step"
    status = store.get_json("status.json")
    assert status["state"] == "DONE" and is_version(status["checkpoint_step"]) and status["checkpoint_step"] > version


PAIR = f"{sys.executable} safetensors_pair.py 10 30"  # an epoch every 3 s


def test_weights_beside_a_state_json_come_back_together_at_the_epoch_the_json_states(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "safetensors-pair")
    first = tmp_path / "first"
    with FakeImds(instance_id="i-pair-first") as imds:
        agent = instance(aws_env, bucket, store.job, first, imds, command=PAIR)
        agent.power_off_when(lambda: (store.latest_step() or 0) >= 3, what="epoch 3 in S3")
    in_s3 = store.latest_step()
    second = tmp_path / "second"
    with FakeImds(instance_id="i-pair-second") as imds:
        agent = instance(aws_env, bucket, store.job, second, imds, command=PAIR)
        agent.run_to_the_end()
    assert f"resuming from epoch {in_s3}" in agent.lines, agent.text()
    assert 0 <= where(first) - (in_s3 or 0) <= 2, "within one save and the 2 s it lies still"
    assert "finished at epoch 10" in agent.lines and store.get_json("status.json")["state"] == "DONE"
