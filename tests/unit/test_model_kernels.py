"""Strict determinism on a GPU, checked without one: every aten op the built-in models run forward and
backward is one torch has a deterministic CUDA kernel for, so `--deterministic strict` (the default)
never refuses our own models at start-up on a user's GPU.

The ops are the ones torch's `use_deterministic_algorithms` documents as raising on CUDA (torch 2.13),
by their aten names; the trace is taken on the CPU with a dispatch mode, which sees the same aten ops
as on CUDA (the device decides only the kernel below them). Attention is the exception: on CUDA its
backward runs in flash, memory-efficient or cuDNN kernels, which strict mode switches to their
deterministic algorithms; tests/integration/test_cuda_determinism.py proves that on a GPU.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from spot_trainer.builtin.models import build_model, compute_loss

NO_DETERMINISTIC_CUDA_KERNEL = {
    "aten.avg_pool3d_backward", "aten._adaptive_avg_pool2d_backward", "aten._adaptive_avg_pool3d_backward",
    "aten.adaptive_max_pool2d_backward", "aten.fractional_max_pool2d_backward",
    "aten.fractional_max_pool3d_backward", "aten.max_unpool2d", "aten.max_unpool3d",
    "aten.upsample_linear1d_backward", "aten.upsample_bilinear2d_backward", "aten.upsample_bicubic2d_backward",
    "aten.upsample_trilinear3d_backward", "aten.reflection_pad1d_backward", "aten.reflection_pad2d_backward",
    "aten.reflection_pad3d_backward", "aten.nll_loss2d_forward", "aten._ctc_loss_backward", "aten.put_",
    "aten.put", "aten.histc", "aten.bincount", "aten.median", "aten.grid_sampler_2d_backward",
    "aten.grid_sampler_3d_backward", "aten.cumsum", "aten.cumsum_",
}


class TracedOps(TorchDispatchMode):
    """Records the name of every aten op dispatched while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def ops_of_one_step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> set[str]:
    with TracedOps() as traced:
        compute_loss(model.train(), inputs, targets).backward()  # type: ignore[no-untyped-call]
    return traced.names


def batch(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    if name == "resnet":
        return torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    return torch.randint(0, 256, (2, 16)), torch.randint(0, 256, (2, 16))


@pytest.mark.parametrize("name", ["resnet", "lm"])
def test_the_built_in_models_use_only_ops_with_a_deterministic_cuda_kernel(name: str) -> None:
    ops = ops_of_one_step(build_model(name, width=8, context=16), *batch(name))
    assert "aten.convolution_backward" in ops if name == "resnet" else "aten.embedding_dense_backward" in ops
    assert not ops & NO_DETERMINISTIC_CUDA_KERNEL


class PoolsToTwoByTwo(nn.Module):
    """Global pooling to 2x2 instead of 1x1: torch then runs adaptive pooling, whose CUDA backward has
    no deterministic kernel (1x1 pooling is a mean, which has)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.head = nn.Linear(16, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.head(F.adaptive_avg_pool2d(self.conv(images), 2).flatten(1))
        return result


def test_a_model_with_such_an_op_is_caught() -> None:
    ops = ops_of_one_step(PoolsToTwoByTwo(), *batch("resnet"))
    assert ops & NO_DETERMINISTIC_CUDA_KERNEL == {"aten._adaptive_avg_pool2d_backward"}
