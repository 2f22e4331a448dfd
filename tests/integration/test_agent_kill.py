"""Whole instances die without notice (SIGKILL of the agent and everything below it) at random times;
replacements resume from S3 and the job still ends with weights bit-identical to an uninterrupted run."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
import torch

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.files.local import load_model_weights
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import REPO_ROOT, AgentProcess, agent_env

STEPS = 60
# Steps of at least 50 ms, so a kill aimed at a step lands within a few steps of it on any machine.
TRAIN_ARGS = (f"--model lm --synthetic --steps {STEPS} --width 16 --context 16 --batch-size 8 "
              "--checkpoint-every-steps 10 --log-every 1 --min-step-seconds 0.05")
LAST_KILL_STEP = STEPS - 10  # a kill (plus up to 0.3 s and polling) always lands before the end


def start_uninterrupted(directory: Path) -> subprocess.Popen[bytes]:
    """The reference run, in parallel with the interrupted one."""
    return subprocess.Popen([sys.executable, "-m", "spot_trainer", "train", *TRAIN_ARGS.split()], cwd=REPO_ROOT,
                            env={**os.environ, "CHECKPOINT_DIR": str(directory)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def steps_seen(agent: AgentProcess) -> list[int]:
    """Steps this agent's command has reported completing, in order."""
    return [event["step"] for event in agent.events("step")]


def kill_step(agent: AgentProcess, rng: random.Random) -> int:
    """A random step 3 to 25 past where this agent resumed, never past LAST_KILL_STEP."""
    agent.wait_for(lambda: bool(steps_seen(agent)), timeout=180, what="the first step")
    return min(steps_seen(agent)[0] + rng.randint(3, 25), LAST_KILL_STEP)


def run_with_kills(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, kills: int, seed: int
) -> RemoteStore:
    """`kills` agents killed at random moments while training, then one that runs to the end. Odd
    trials reuse the previous instance's disk (the agent restarted in place); even ones start fresh."""
    rng = random.Random(seed)
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "kills")
    for trial in range(kills + 1):
        instance = f"i-{trial - trial % 2}"
        with FakeImds(instance_id=instance) as imds:
            agent = AgentProcess(agent_env(aws_env, bucket=bucket, job="kills",
                                           checkpoint_dir=tmp_path / instance, imds_url=imds.url,
                                           instance_id=instance, command="builtin", train_args=TRAIN_ARGS,
                                           lease_ttl_seconds="2")).start()
            try:
                if trial < kills:
                    target = kill_step(agent, rng)
                    agent.wait_for(lambda agent=agent, target=target: max(steps_seen(agent)) >= target,
                                   timeout=180, what=f"step {target}")
                    time.sleep(rng.uniform(0.0, 0.3))  # mid-step, mid-save or mid-upload
                    agent.kill_tree()
                    assert not agent.events("done"), f"trial {trial} finished before its kill"
                else:
                    assert agent.wait(timeout=240) == 0, agent.text()
            finally:
                agent.stop()
    return store


def check_bit_identical(
    store: RemoteStore, tmp_path: Path, reference: subprocess.Popen[bytes], seed: int
) -> None:
    restored = store.restore(tmp_path / "final")
    assert restored is not None and restored.name == f"step-{STEPS:08d}"
    assert reference.wait(timeout=240) == 0
    final = load_model_weights(restored)
    expected = load_model_weights(tmp_path / "reference" / f"step-{STEPS:08d}")
    different = [name for name in expected if not torch.equal(final[name], expected[name])]
    assert final.keys() == expected.keys() and not different, f"SPOT_KILL_SEED={seed}: {different} differ"
    assert store.get_json("status.json")["state"] == "DONE"


def test_random_sigkills_end_bit_identical(aws_env: dict[str, str], bucket: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("SPOT_KILL_SEED", "7"))
    print(f"replay with SPOT_KILL_SEED={seed}")  # shown with the failure
    reference = start_uninterrupted(tmp_path / "reference")
    try:
        store = run_with_kills(aws_env, bucket, tmp_path, kills=2, seed=seed)
        check_bit_identical(store, tmp_path, reference, seed)
    finally:
        reference.kill()


@pytest.mark.slow
def test_many_random_sigkills_end_bit_identical(aws_env: dict[str, str], bucket: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("SPOT_KILL_SEED", random.randrange(1 << 30)))
    print(f"replay with SPOT_KILL_SEED={seed}")  # shown with the failure
    reference = start_uninterrupted(tmp_path / "reference")
    try:
        store = run_with_kills(aws_env, bucket, tmp_path, kills=8, seed=seed)
        check_bit_identical(store, tmp_path, reference, seed)
    finally:
        reference.kill()
