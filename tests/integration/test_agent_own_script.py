"""A user's own PyTorch script (no trainer import) survives an interruption and ends bit-identical."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import torch

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import OWN_SCRIPT, AgentProcess, agent_env
from tests.integration.test_agent_failures import create_group, desired_capacity

STEPS = 40
SCRIPT = f"{sys.executable} {OWN_SCRIPT} --steps {STEPS} --every 10 --sleep 0.05"


def reference_weights(tmp_path: Path) -> dict[str, torch.Tensor]:
    directory = tmp_path / "reference"
    subprocess.run([sys.executable, str(OWN_SCRIPT), "--steps", str(STEPS), "--every", "10"],
                   env={**os.environ, "CHECKPOINT_DIR": str(directory)}, check=True, capture_output=True)
    return torch.load(directory / f"step-{STEPS}", weights_only=True)["model"]


def last_reported_step(agent: AgentProcess) -> int:
    return max(int(line.split()[1]) for line in agent.lines if line.startswith("step "))


def test_own_script_resumes_across_an_interruption_with_identical_weights(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"])
    store = RemoteStore(s3, bucket, "own")
    with FakeImds(instance_id="i-first") as imds:
        first = AgentProcess(agent_env(aws_env, bucket=bucket, job="own", checkpoint_dir=tmp_path / "a",
                                       imds_url=imds.url, instance_id="i-first", command=SCRIPT)).start()
        try:
            first.wait_for(lambda: any(line.startswith("step 15 ") for line in first.lines), what="step 15")
            imds.announce_interruption(in_seconds=120)
            assert first.wait() == 0, first.text()
        finally:
            first.stop()
    stopped_at = last_reported_step(first)
    assert STEPS > stopped_at >= 15
    assert store.latest_step() == stopped_at, "the emergency checkpoint is the last step the script reported"
    assert store.get_json("status.json")["state"] == "INTERRUPTED"

    group = f"own-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group)
    with FakeImds(instance_id="i-second") as imds:
        second = AgentProcess(agent_env(aws_env, bucket=bucket, job="own", checkpoint_dir=tmp_path / "b",
                                        imds_url=imds.url, instance_id="i-second", command=SCRIPT,
                                        asg_name=group)).start()
        try:
            assert second.wait() == 0, second.text()
        finally:
            second.stop()
    assert f"resumed from {tmp_path / 'b'}/step-{stopped_at} at step {stopped_at}" in second.lines
    status = store.get_json("status.json")
    assert (status["state"], status["interruptions"], status["attempt"]) == ("DONE", 1, 2)
    assert status["step"] == status["checkpoint_step"] == STEPS, "progress known from checkpoints alone"
    assert desired_capacity(autoscaling, group) == 0, "a finished job stops paying"

    restored = store.restore(tmp_path / "final")
    assert restored is not None and restored.name == f"step-{STEPS}"
    final = torch.load(restored, weights_only=True)["model"]
    expected = reference_weights(tmp_path)
    assert final.keys() == expected.keys()
    assert all(torch.equal(final[name], expected[name]) for name in expected)
    kinds = [event["kind"] for event in store.events()]
    assert kinds.count("interruption") == 1 and kinds[-1] == "done" and "resume" in kinds
