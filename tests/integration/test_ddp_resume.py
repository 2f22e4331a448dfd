"""The built-in trainer as a torchrun world (gloo on CPU, real processes): stopped by a signal to one
rank, every rank stops at the same step and rank 0 saves it; resumed at the same world size the run
ends bit-identical to an uninterrupted one, and at another world size it resumes at the same step
with the same global batch, and says once that it is no longer bit-identical.

Three ranks, not two: two ranks' gradients add up the same in either order, three do not, so only a
world of three shows that the ranks are added in one fixed order whatever step the processes started at."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from spot_trainer.storage.files.local import checkpoint_name, load_model_weights
from tests.integration.agent_runner import REPO_ROOT, descendants

STEPS = 30
ARGS = ["--model", "lm", "--synthetic", "--steps", str(STEPS), "--width", "16", "--context", "16",
        "--batch-size", "12", "--checkpoint-every-steps", "10", "--log-every", "1"]


def torchrun(ranks: int, directory: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CHECKPOINT_DIR": str(directory), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": str(REPO_ROOT)}
    env.pop("RESUME_FROM", None)
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
         "-m", "spot_trainer", "train", *ARGS, *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def events(output: str, kind: str) -> list[dict]:
    return [record for line in output.splitlines() if line.startswith("{")
            and (record := json.loads(line)).get("event") == kind]


def stop_one_rank_after(process: subprocess.Popen[str], step: int) -> str:
    """Read until a rank reports `step`, then SIGTERM one worker (not torchrun, not the others)."""
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith('{"event": "step"') and json.loads(line)["step"] >= step:
            workers = [pid for pid in descendants(process.pid) if b"spot_trainer" in Path(f"/proc/{pid}/cmdline")
                       .read_bytes()]
            os.kill(max(workers), signal.SIGTERM)
            break
    rest, _ = process.communicate(timeout=120)
    return "".join(lines) + rest


def finish(process: subprocess.Popen[str]) -> str:
    output, _ = process.communicate(timeout=180)
    assert process.returncode == 0, output[-3000:]
    return output


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    directory = tmp_path_factory.mktemp("ddp-reference")
    finish(torchrun(3, directory))
    return load_model_weights(directory / checkpoint_name(STEPS))


def test_a_signal_to_one_rank_stops_the_world_at_one_step_and_resumes_bit_identical(
    tmp_path: Path, uninterrupted: dict[str, torch.Tensor]
) -> None:
    output = stop_one_rank_after(torchrun(3, tmp_path, "--min-step-seconds", "0.05"), step=14)
    stops = events(output, "group_stop")
    assert sorted(e["rank"] for e in stops) == [0, 1, 2] and len({e["step"] for e in stops}) == 1, output[-3000:]
    stopped_at = stops[0]["step"]
    assert [e["step"] for e in events(output, "emergency_checkpoint")] == [stopped_at]
    assert (tmp_path / checkpoint_name(stopped_at)).is_dir()

    resumed = finish(torchrun(3, tmp_path))
    assert {e["step"] for e in events(resumed, "resumed")} == {stopped_at}
    weights = load_model_weights(tmp_path / checkpoint_name(STEPS))
    assert weights.keys() == uninterrupted.keys()
    assert all(torch.equal(weights[name], uninterrupted[name]) for name in weights)


def test_another_world_size_resumes_at_the_same_step_with_the_same_global_batch(
    tmp_path: Path, uninterrupted: dict[str, torch.Tensor]
) -> None:
    output = stop_one_rank_after(torchrun(3, tmp_path, "--min-step-seconds", "0.05"), step=14)
    stopped_at = events(output, "group_stop")[0]["step"]
    resumed = finish(torchrun(2, tmp_path))
    assert {e["step"] for e in events(resumed, "resumed")} == {stopped_at}
    assert sorted(e["step"] for e in events(resumed, "done")) == [STEPS] * 2
    # Rank 0 says it once for the world: one warning, one event for the agent to record.
    warned = [line for line in resumed.splitlines() if line.startswith("warning:") and "another platform" in line]
    assert len(warned) == 1 and "world size 3 -> 2" in warned[0], warned
    assert [(e["step"], e["reason"]) for e in events(resumed, "not_bit_identical")] == [
        (stopped_at, "trained on another platform (world size 3 -> 2)")]
    # The same global batches in the same order, split two ways instead of three; the dropout masks
    # (drawn per rank) and the order of float additions differ, so the run is not bit-identical, but
    # from the resume point it moves the weights the way the uninterrupted run did.
    start = flat(load_model_weights(tmp_path / checkpoint_name(stopped_at)))
    moved = flat(load_model_weights(tmp_path / checkpoint_name(STEPS))) - start
    expected = flat(uninterrupted) - start
    assert torch.nn.functional.cosine_similarity(moved, expected, dim=0) > 0.95


def flat(weights: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([tensor.flatten().double() for tensor in weights.values()])
