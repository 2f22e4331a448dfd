"""How exact the built-in trainer is: `--deterministic strict` (the default) or `off`.

strict: on CUDA every kernel is deterministic (`torch.use_deterministic_algorithms(True)` without
warn_only, which also makes the flash and memory-efficient attention backward passes take their
deterministic algorithms and passes over cuDNN attention, which has none), cuBLAS works on a fixed
workspace and cuDNN never autotunes (new tensors are not pre-filled: torch's kernels never read memory
they did not write); a torchrun world adds its ranks' gradients in rank order (ordered_reduce.py).
Training interrupted any number of times then ends bit-identical to an uninterrupted run on the same
hardware and world size.
off: cuDNN autotunes and kernels may add in any order. A resumed run still continues at the same step
with the same data order and generators, but its weights drift from an uninterrupted run's by float
rounding. CPU kernels are deterministic either way; torch's deterministic mode would only slow them.
"""

from __future__ import annotations

import copy
import os
import re

import torch
import torch.utils.deterministic

from ..builtin_arguments import DETERMINISM_MODES
from .models import compute_loss

STRICT, OFF = DETERMINISM_MODES
CUBLAS_WORKSPACE = ":4096:8"
CUBLAS_WORKSPACES = (":4096:8", ":16:8")  # the two settings NVIDIA documents as reproducible


class NotDeterministicError(RuntimeError):
    """Strict determinism cannot hold for this model here; the message says why in one line."""


def prepare_process(mode: str) -> None:
    """Before CUDA starts: cuBLAS reads its workspace setting once, when its first handle is made."""
    if mode == STRICT:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)


def configure_kernels(mode: str, device: torch.device) -> None:
    if device.type != "cuda":
        return
    setting = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if mode == STRICT and setting not in CUBLAS_WORKSPACES:
        raise NotDeterministicError(
            f"--deterministic strict: CUBLAS_WORKSPACE_CONFIG is {setting!r}, and cuBLAS is reproducible only with "
            f"{' or '.join(CUBLAS_WORKSPACES)}; unset it or run with --deterministic off")
    torch.use_deterministic_algorithms(mode == STRICT)
    # Deterministic mode also fills every new tensor before use, in case a kernel reads memory it never
    # wrote; torch's own kernels do not, so the fill only costs (on an H200: 13% of the LM's samples/s,
    # 18% of the ResNet's)
    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]  # a module property
    torch.backends.cudnn.benchmark = mode == OFF  # autotuning picks the fastest kernel, run by run


def kernel_problem(error: BaseException) -> str | None:
    """One line for torch's refusal of a non-deterministic kernel under strict mode, or None."""
    text = str(error)
    if match := re.match(r"(\S+) does not have a deterministic implementation", text):
        return (f"--deterministic strict: {match.group(1)} has no deterministic kernel in torch "
                f"{torch.__version__}; run with --deterministic off to train without bit-identical resume")
    return None


def check_kernels(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                  amp: torch.dtype | None) -> None:
    """One forward and backward pass on a copy of the model, before training: an op without a
    deterministic kernel stops the trainer at start-up with one line, never hours into a run. The copy
    and the forked generators leave the run exactly as an unchecked one would be."""
    if not torch.are_deterministic_algorithms_enabled():
        return
    device = inputs.device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        probe = copy.deepcopy(model).train()
        try:
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                loss = compute_loss(probe, inputs, targets)
            loss.backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        except RuntimeError as error:
            if (line := kernel_problem(error)) is None:
                raise
            raise NotDeterministicError(line) from None
        finally:
            del probe
