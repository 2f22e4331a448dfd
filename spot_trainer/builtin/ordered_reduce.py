"""Gradient averaging over a torchrun world in one fixed order, for bit-identical resume.

DDP's own all-reduce adds the ranks' gradients in an order that depends on where each value sits in its
bucket, and DDP lays its buckets out again after the first step of every process: a world resumed at
step k adds some values in another order than the uninterrupted world did at step k+1, and with three or
more ranks float addition is not associative, so the weights part. Gathering every rank's bucket and
adding them rank 0 first makes each value's sum the same whatever the layout, the algorithm NCCL or gloo
picks, or the step the processes started at.
"""

# No `from __future__ import annotations`: DDP checks this hook's annotations as objects.

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import GradBucket  # dist.GradBucket itself; torch's stubs export it only here


def average_in_rank_order(_: object, bucket: GradBucket) -> torch.futures.Future[torch.Tensor]:
    """A DDP communication hook: the mean of the ranks' gradients, summed rank 0, 1, 2, ... on every rank."""
    mine = bucket.buffer()
    world = dist.get_world_size()
    gathered = [torch.empty_like(mine) for _ in range(world)]
    work = dist.all_gather(gathered, mine, async_op=True)
    assert work is not None, "async_op=True returns a work handle"

    def add_in_order(_: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        total = gathered[0].clone()
        for part in gathered[1:]:
            total.add_(part)
        return total.div_(world)

    ordered: torch.futures.Future[torch.Tensor] = work.get_future().then(add_in_order)
    return ordered
