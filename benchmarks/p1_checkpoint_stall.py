"""P1: how long a checkpoint stalls the training loop, against what the alternatives cost.

For a state of --gib GiB (float32 tensors of a model-like size mix) it measures, in one process:
- async_save_stall_s: time `AsyncCheckpointer.save` blocks the caller (snapshot into reused buffers);
- copy_warm_s:        a bare `copy_` of the state into warm preallocated buffers (the floor);
- clone_s:            `clone()` of the state into fresh memory (the naive snapshot);
- sync_save_s:        synchronous `torch.save` + fsync (what a blocking checkpoint costs).
Each is repeated --repeats times; medians are compared with the targets
(stall <= 1.2x copy, and >= 10x below the synchronous save). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from spot_trainer.storage.files.local import AsyncCheckpointer, StagingBuffers
from stacks.help_text import first_paragraph

TENSOR_MIB = 64  # a mix of large layers, like a model's state dict


def make_state(gib: float) -> dict[str, torch.Tensor]:
    total = int(gib * 2**30) // 4
    per_tensor = TENSOR_MIB * 2**20 // 4
    sizes = [per_tensor] * (total // per_tensor) + ([total % per_tensor] if total % per_tensor else [])
    return {f"layer{index}.weight": torch.randn(size) for index, size in enumerate(sizes)}


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def sync_save(state: dict[str, torch.Tensor], path: Path) -> None:
    torch.save(state, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def measure(gib: float, repeats: int, directory: Path) -> dict[str, object]:
    state = make_state(gib)
    store = AsyncCheckpointer(directory / "async", keep=1)
    store.save(0, state)  # first save allocates the buffers; the loop pays that once per run
    store.wait()
    stalls, writes = [], []
    for step in range(1, repeats + 1):
        stalls.append(store.save(step, state))
        writes.append(timed(store.wait))
    buffers = StagingBuffers()
    buffers.stage(state)
    copies = [timed(lambda: buffers.stage(state)) for _ in range(repeats)]
    clones = []
    for _ in range(repeats):
        clones.append(timed(lambda: {name: tensor.clone() for name, tensor in state.items()}))
    syncs = [timed(lambda: sync_save(state, directory / "sync.pt")) for _ in range(repeats)]
    median = statistics.median
    stall, copy, sync = median(stalls), median(copies), median(syncs)
    return {
        "benchmark": "p1_checkpoint_stall",
        "state_gib": round(sum(t.numel() * t.element_size() for t in state.values()) / 2**30, 3),
        "repeats": repeats,
        "threads": torch.get_num_threads(),
        "median_s": {
            "async_save_stall": round(stall, 4),
            "copy_warm": round(copy, 4),
            "clone": round(median(clones), 4),
            "sync_save": round(sync, 4),
            "async_background_write": round(median(writes), 4),
        },
        "samples_s": {"async_save_stall": [round(s, 4) for s in stalls], "copy_warm": [round(s, 4) for s in copies],
                      "clone": [round(s, 4) for s in clones], "sync_save": [round(s, 4) for s in syncs]},
        "stall_over_copy": round(stall / copy, 3),
        "sync_over_stall": round(sync / stall, 1),
        "meets_targets": {"stall_le_1_2x_copy": stall <= 1.2 * copy, "stall_10x_below_sync": sync >= 10 * stall},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--gib", type=float, default=1.0, help="state size in GiB (default 1)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where checkpoints are written (default: a temp dir)")
    args = parser.parse_args()
    if args.gib <= 0 or args.repeats < 1:
        parser.error("--gib must be > 0 and --repeats >= 1")
    directory = Path(tempfile.mkdtemp(prefix="p1-", dir=args.dir))
    try:
        print(json.dumps(measure(args.gib, args.repeats, directory)), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
