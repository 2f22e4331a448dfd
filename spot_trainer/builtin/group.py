"""The built-in trainer's process group: every rank of a torchrun world, or a group of one.

Under torchrun (WORLD_SIZE > 1) the ranks train one model with DDP (gloo on CPU, NCCL on CUDA):
`--batch-size` is the *global* batch, drawn from the same seeded order on every rank and split by
rank, so a changed world size keeps the same global batch at every step; under `--deterministic strict`
the ranks' gradients are added in rank order (ordered_reduce.py). Each step boundary ends
with small all-reduces that carry "someone was asked to stop" and "a checkpoint is due", so every
rank stops, and saves, at the same step (a clock-based save falls due at different moments on
different ranks). Rank 0 writes checkpoints; the others wait for it.

A dead peer is noticed by the next collective: a killed process's sockets close at once, and a
peer that vanishes without a word (power-off) is given up after `SPOT_COLLECTIVE_TIMEOUT` seconds.

A rank ends its process without Python's finalization (`Group.end_process`): see there why.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class Group:
    """One rank's place in the world; the defaults are a group of one (no torchrun)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def writer(self) -> bool:
        return self.rank == 0

    def device(self) -> torch.device:
        if not torch.cuda.is_available():
            return torch.device("cpu")
        if self.distributed:
            torch.cuda.set_device(self.local_rank)
        return torch.device("cuda", self.local_rank if self.distributed else torch.cuda.current_device())

    def shard(self, indices: np.ndarray) -> np.ndarray:
        """This rank's part of the global batch: every world-th index from its rank on."""
        return indices[self.rank:: self.world]

    def loss_weight(self, local: int, global_batch: int) -> float:
        """DDP averages gradients over ranks; weighting each rank's mean loss by its share of the
        batch makes that average the mean over the whole global batch, even for uneven shards."""
        return local * self.world / global_batch

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on any: all ranks stop, or save, at the same step."""
        if not self.distributed:
            return flag
        value = torch.tensor([float(flag)], device=_collective_device())
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def max_int(self, value: int) -> tuple[int, int]:
        """(the highest value over all ranks, the lowest rank that holds it)."""
        if not self.distributed:
            return value, 0
        values = [int(v) for v in self.gather(value)]
        highest = max(values)
        return highest, values.index(highest)

    def gather(self, value: Any) -> list[Any]:
        if not self.distributed:
            return [value]
        values: list[Any] = [None] * self.world
        dist.all_gather_object(values, value)
        return values

    def broadcast(self, value: Any, source: int) -> Any:
        if not self.distributed:
            return value
        box = [value if self.rank == source else None]
        dist.broadcast_object_list(box, src=source, device=_collective_device())
        return box[0]

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def close(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()

    def end_process(self, code: int) -> int:
        """After `close`: a group of one returns `code`; a rank of a world flushes its output and
        ends the process with `code` at once, skipping interpreter finalization.

        Why: DDP keeps the process group, and its gloo worker threads, alive past
        destroy_process_group, and a worker drops its last collective's tensors a moment after the
        collective completes. A drop that lands while Python finalizes needs the GIL; a finalizing
        interpreter ends such a thread instead, the unwinding meets a noexcept destructor and the
        C++ runtime aborts the process ("terminate called without an active exception", SIGABRT)
        after a run that succeeded, and torchrun reports the whole world failed. By this point every
        checkpoint is committed and the checkpoint writer is a daemon thread finalization would not
        wait for, so skipping it loses nothing."""
        if not self.distributed:
            return code
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _collective_device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def join_group() -> Group:
    """The torchrun world this process belongs to (initialised), or a group of one."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Group()
    timeout = timedelta(seconds=float(os.environ.get("SPOT_COLLECTIVE_TIMEOUT", DEFAULT_COLLECTIVE_TIMEOUT_SECONDS)))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", timeout=timeout)
    return Group(rank=dist.get_rank(), world=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", "0")))


SOLO = Group()
