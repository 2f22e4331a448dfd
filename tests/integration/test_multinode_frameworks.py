"""Unmodified Lightning and Accelerate scripts on three nodes with `min_nodes = 2`, through the three
ways a spot node goes (a power-off of the publisher, of a non-publisher, a notice to one), each
followed by a replacement. The job ends DONE with no lost node taken for a failure, and the final
published checkpoint holds the model and loads in its framework.

Lightning's script is written for one node (`L.Trainer()` with no num_nodes): under the agent it
trains as one world of each round's nodes. Accelerate's `save_state` writes `random_states_<rank>.pkl`
on every node; only the node holding rank 0 publishes, and the others resume without theirs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.integration.agent_runner import REPO_ROOT
from tests.integration.lost_nodes import (
    TIMEOUT,
    every_node_finishes,
    held,
    lose_each_kind_of_node,
    no_lost_node_was_a_failure,
)
from tests.integration.test_multinode import cluster, job_store

pytestmark = TIMEOUT

SCRIPTS = REPO_ROOT / "tests/fixtures/plain_scripts"
EPOCHS = 5  # of 8192 samples in batches of 32: about 86 steps per epoch on three nodes (a save each)
# The three losses come at the first three epochs' saves; two epochs are left for the last rounds.
ACCELERATE_STEPS = 120


def lightning_model(checkpoint: Path) -> set[str]:
    saved = torch.load(next(checkpoint.glob("*.ckpt")) if checkpoint.is_dir() else checkpoint, weights_only=False)
    assert saved["epoch"] == EPOCHS - 1, saved["epoch"]
    return set(saved["state_dict"])


def accelerate_model(checkpoint: Path) -> set[str]:
    return set(load_file(checkpoint / "model.safetensors"))


KINDS = {
    "lightning": (f"{sys.executable} {SCRIPTS / 'lightning_train.py'} {EPOCHS}", {"PL_STEP_SECONDS": "0.01"},
                  lightning_model, {"net.0.weight", "net.2.bias"}),
    "accelerate": (f'{sys.executable} {SCRIPTS / "accelerate_train.py"} --output_dir "$CHECKPOINT_DIR" '
                   f"--max_train_steps {ACCELERATE_STEPS} --checkpointing_steps 20 --step_seconds 0.03 "
                   "--resume_from_checkpoint latest", {}, accelerate_model, {"0.weight", "2.bias"}),
}


# Seen once, [lightning], with the suite beside six busy processes (three times the load of make
# test-under-load): round 0 ended before any loss, rank 1's torchrun stopping its worker during
# Lightning's set-up broadcast and ranks 0 and 2 seeing "Connection closed by peer"; the same world's
# second round then spent the restart budget of 1 and the job failed. Not seen in five runs at the
# documented loads. Suspected: a node's rendezvous keep-alive missed for 6 s under that load, read as a
# node leaving and rejoining in the same world.
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_unmodified_script_survives_every_kind_of_lost_node(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    command, env, model_of, holds = KINDS[kind]
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # the agents pass their environment on to the command
    job = f"{kind}-{bucket[-8:]}"
    store = job_store(aws_env, bucket, job)
    # Lightning's own SIGTERM handler broadcasts from the notified rank alone and blocks there until
    # torchrun kills it at the end of the grace period: a short one keeps the test short.
    gates = tmp_path / "gates"
    if kind == "accelerate":  # 120 steps in all: held at 20, 40 and 60 until each loss is in
        command = held(command, gates, 20, 40, 60)
    with cluster(aws_env, bucket, job, tmp_path, command=command, restart_budget="1", grace_seconds="10") as group:
        lose_each_kind_of_node(group, store, first=20, gap=20, gates=gates)
        every_node_finishes(group, store)
    assert store.get_json("status.json")["state"] == "DONE"
    no_lost_node_was_a_failure(group)
    final = store.restore_at_or_below(tmp_path / "restored", store.latest_step())
    assert final is not None
    assert holds <= model_of(final), model_of(final)
