"""What a checkpoint was trained on, and the one line a resume elsewhere gets: a fleet of several GPU
models (g5, g6, g4dn) resumes fine, but not bit-identically, and the user is told which part changed."""

from __future__ import annotations

import torch

from spot_trainer.builtin.platform_record import current_platform, platform_change

A10G = {"device": "NVIDIA A10G", "cuda": "13.0", "cudnn": "91000", "torch": "2.13.0", "precision": "bfloat16",
        "world size": "1"}


def test_the_same_platform_is_no_change() -> None:
    assert platform_change(dict(A10G), dict(A10G)) is None


def test_another_gpu_model_and_world_size_are_both_named() -> None:
    t4 = A10G | {"device": "Tesla T4", "world size": "2"}
    assert platform_change(A10G, t4) == "device NVIDIA A10G -> Tesla T4, world size 1 -> 2"


def test_a_checkpoint_without_a_record_is_not_called_different() -> None:
    assert platform_change(None, A10G) is None  # written before records existed: nothing known differs


def test_this_cpu_is_described_by_the_instruction_set_torch_runs_on() -> None:
    platform = current_platform(torch.device("cpu"), None, world=3)
    assert platform["device"] == f"CPU ({torch.backends.cpu.get_cpu_capability()})"
    assert platform["precision"] == "float32" and platform["world size"] == "3"
    assert all(type(value) is str for value in platform.values())  # torch.load(weights_only=True) reads it
