"""A command that runs its ranks under torchrun (as `accelerate launch` does on a multi-GPU machine)
gets the agent's whole grace period to save after a notice. torchrun forwards the stop signal to its
ranks, then kills them after its own shutdown timeout, 30 s unless told otherwise: a rank whose
emergency save takes longer would lose it, with the agent still willing to wait."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env

SAVE_SECONDS = 35  # past torchrun's default shutdown timeout, within the agent's grace (60 s in tests)
# A rank that saves step 1, then on the stop signal takes SAVE_SECONDS to save step 2 (once: torchrun
# forwards the signal the agent also sends to the whole group).
RANK = f"""#!/usr/bin/env bash
set -Eeuo pipefail
save_and_exit() {{ trap '' TERM; sleep {SAVE_SECONDS}; echo w > "$CHECKPOINT_DIR/model_step2.pt"; exit 143; }}
trap save_and_exit TERM
echo w > "$CHECKPOINT_DIR/model_step1.pt"
echo '{{"event": "step", "step": 1}}'
while true; do sleep 0.1; done
"""


def test_a_rank_under_torchrun_may_take_longer_than_30_s_to_save_after_a_notice(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    rank = tmp_path / "rank.sh"
    rank.write_text(RANK)
    command = f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node=1 --no-python bash {rank}"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "torchrun-grace")
    with FakeImds(instance_id="i-torchrun") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=store.job, checkpoint_dir=tmp_path / "c",
                                       imds_url=imds.url, instance_id=imds.instance_id, command=command)).start()
        try:
            agent.wait_for(lambda: bool(agent.events("step")), timeout=120, what="step 1")
            imds.announce_interruption(in_seconds=120)
            assert agent.wait(timeout=120) == 0, agent.text()
        finally:
            agent.stop()
    assert store.latest_step() == 2, agent.text()  # saved after the notice, not cut off at 30 s
