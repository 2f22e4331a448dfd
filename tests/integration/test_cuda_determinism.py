"""Exact resume on the GPU a user trains on: the LM at context 512 in bf16, where attention's backward
pass has non-deterministic kernels, and the ResNet (cuDNN convolutions, batch norm) each end
bit-identical across a SIGTERM and a SIGKILL in strict mode.

Skipped without CUDA (CI has none); run it on a GPU machine with
`python -m pytest tests/integration/test_cuda_determinism.py`.
"""

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
from tests.integration.agent_runner import REPO_ROOT

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

STEPS = 300
COMMON = ["--steps", str(STEPS), "--synthetic", "--checkpoint-every-steps", "50", "--log-every", "1"]
MODELS = {
    "lm": ["--model", "lm", "--width", "512", "--context", "512", "--batch-size", "32"],
    "resnet": ["--model", "resnet", "--width", "64", "--batch-size", "256"],
}


def start(directory: Path, model: str) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("RESUME_FROM", "CUBLAS_WORKSPACE_CONFIG")}
    path = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])  # `make gpu-check` links it
    return subprocess.Popen(
        [sys.executable, "-m", "spot_trainer.builtin.loop", *MODELS[model], *COMMON, "--checkpoint-dir", directory],
        env=env | {"PYTHONPATH": path}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_to_end(directory: Path, model: str) -> None:
    process = start(directory, model)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]


def signal_at(directory: Path, model: str, step: int, number: signal.Signals) -> int:
    """Start (or resume) the trainer, send `number` once it reports `step`, return its exit code."""
    process = start(directory, model)
    assert process.stdout is not None
    for line in process.stdout:
        event = json.loads(line)
        if event["event"] == "step" and event["step"] >= step:
            process.send_signal(number)
            break
    process.communicate(timeout=300)
    return process.returncode


def final_weights(directory: Path) -> dict[str, torch.Tensor]:
    return load_model_weights(directory / checkpoint_name(STEPS))


@pytest.mark.parametrize("model", MODELS)
def test_training_resumes_bit_identical_across_sigterm_and_sigkill(model: str, tmp_path: Path) -> None:
    first, second, interrupted = tmp_path / "first", tmp_path / "second", tmp_path / "interrupted"
    run_to_end(first, model)
    run_to_end(second, model)
    assert signal_at(interrupted, model, 80, signal.SIGTERM) == 75  # emergency checkpoint at the step boundary
    assert signal_at(interrupted, model, 180, signal.SIGKILL) == -signal.SIGKILL  # back to the last periodic one
    run_to_end(interrupted, model)

    reference = final_weights(first)
    for directory in (second, interrupted):
        weights = final_weights(directory)
        different = [name for name in reference if not torch.equal(weights[name], reference[name])]
        assert not different, f"{directory.name}: {len(different)} tensors differ, e.g. {different[:3]}"
