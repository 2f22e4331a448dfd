"""What a checkpoint's steps were computed on, so a resume that cannot be bit-identical says so.

Exact resume holds on the same hardware and software: another GPU model (a fleet of g5 and g4dn
instances), another CPU instruction set (torch picks its vectorised kernels by it), another torch, CUDA
or cuDNN, another precision or world size each add floats in another order. The record is plain strings,
so a checkpoint still loads with `torch.load(weights_only=True)`; a resume on another platform goes on
(a mixed fleet is a valid choice) with one warning line naming what changed.
"""

from __future__ import annotations

from typing import Any

import torch


def current_platform(device: torch.device, amp: torch.dtype | None, world: int) -> dict[str, str]:
    if device.type == "cuda":
        hardware = {"device": torch.cuda.get_device_name(device), "cuda": str(torch.version.cuda),
                    "cudnn": str(torch.backends.cudnn.version())}  # type: ignore[no-untyped-call]
    else:
        hardware = {"device": f"CPU ({torch.backends.cpu.get_cpu_capability()})"}
    precision = str(amp).removeprefix("torch.") if amp is not None else "float32"
    # str(): torch.__version__ is a TorchVersion, which torch.load(weights_only=True) refuses
    return {**hardware, "torch": str(torch.__version__), "precision": precision, "world size": str(world)}


def platform_change(saved: object, current: dict[str, str]) -> str | None:
    """What differs between the platform a checkpoint was trained on and this one, or None. A checkpoint
    without a record (written before it existed) is taken to match: nothing is known to differ."""
    if not isinstance(saved, dict):
        return None
    changes = [f"{name} {saved[name]} -> {value}" for name, value in current.items()
               if name in saved and saved[name] != value]
    return ", ".join(changes) or None


def reasons_not_bit_identical(state: dict[str, Any], deterministic: str, platform: dict[str, str]) -> list[str]:
    """Why a run resumed from `state` with this --deterministic setting on this platform cannot end
    bit-identical to one never interrupted; empty when it can."""
    reasons = []
    if state.get("deterministic", deterministic) != deterministic:
        reasons.append(f"trained with --deterministic {state['deterministic']}, this run uses {deterministic}")
    if change := platform_change(state.get("platform"), platform):
        reasons.append(f"trained on another platform ({change})")
    return reasons
