"""The ranks of one torchrun world deciding together, for the framework callbacks.

A spot notice reaches one node: if only its ranks stopped, the others would wait at the next
collective until it timed out, and their work since the last save would be lost. Each step the ranks
agree whether any was told to stop (one scalar all-reduce), so all save the same step and stop.

A node that joins a round resumes from the checkpoint on its own disk; the framework loads it per
rank, so ranks resumed from different steps would train apart. At the start they compare steps; if
they differ, every rank exits with EX_NEW_ROUND after saying which step the world should resume
from (`group_stop`), and the agents fetch it from S3 before the next round.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

EX_NEW_ROUND = 76  # as the built-in trainer's peer-lost exit: the agent starts a new round, not a failure


def in_world() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _largest(value: int, device: torch.device | str) -> int:
    """The largest `value` of every rank (a tensor on `device`: NCCL takes CUDA tensors, gloo CPU ones)."""
    tensor = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def any_rank(flag: bool, device: torch.device | str) -> bool:
    """True on every rank when it is true on any (outside a world: `flag`)."""
    return bool(_largest(int(flag), device)) if in_world() else flag


def step_range(step: int, device: torch.device | str) -> tuple[int, int]:
    """(lowest, highest) of the ranks' steps (outside a world: (step, step))."""
    if not in_world():
        return step, step
    return -_largest(-step, device), _largest(step, device)
