"""Checkpoint directories a library wrote whose own files tell when they are whole, whatever the
directory is called (`step-<N>`, `checkpoint-<N>`, `step_<N>`):

    torch.distributed.checkpoint   FSDP's and torchtitan's `step-<N>/`: every rank's shards
                                   (`__<rank>_<i>.distcp`) first, then `.metadata`, which the
                                   coordinator writes last through a rename (torch 2.13
                                   FileSystemWriter.finish): whole once `.metadata` is there and every
                                   shard it lists is here too (on one node's disk, a world spread over
                                   several nodes leaves the other nodes' shards elsewhere: never whole)
    Accelerate's save_state        the diffusers training scripts' `checkpoint-<N>/`: pre-save hooks
                                   (diffusers' `unet/`), then on rank 0 the model, optimizer, scheduler
                                   and samplers, and on every rank its `random_states_<rank>.pkl`, with
                                   no barrier between ranks (accelerate 1.15 save_state,
                                   save_accelerator_state): whole once rank 0's RNG state is there and
                                   every torch archive and safetensors file in it reads whole, and the
                                   directory has been still for SETTLE_SECONDS, since objects registered
                                   with `register_for_checkpointing` follow the RNG state at once
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from ..files.whole_files import SETTLE_SECONDS, file_whole
from . import shards

DCP, ACCELERATE = "torch.distributed.checkpoint", "accelerate"
DCP_METADATA = shards.METADATA
_ACCELERATE_RNG = re.compile(r"^random_states_\d+\.pkl$")
_RANK_0_RNG = "random_states_0.pkl"  # rank 0 writes the model and optimizer before it


def library_of(path: Path) -> str | None:
    """Which library wrote this directory, by the files only it writes; None for anything else."""
    try:
        return _library([entry.name for entry in path.iterdir()]) if path.is_dir() else None
    except OSError:  # pruned while we looked
        return None


def whole(path: Path, superseded: bool, *, shards_elsewhere: bool = False) -> bool | None:
    """Whether a library's directory is whole (`superseded`: a newer one has begun, or its writer is
    gone); None when no library's files show, so the directory's layout decides alone. With
    `shards_elsewhere` (several nodes), a DCP folder is this node's part once its `.metadata` reads:
    the other nodes' ranks hold the rest of its shards (shards.py)."""
    entries = list(path.iterdir()) if path.is_dir() else []  # listed once: each poll looks again
    library = _library([entry.name for entry in entries])
    if library == DCP:
        return _dcp_whole(path, shards_elsewhere)
    if library == ACCELERATE:
        return _accelerate_whole(entries, superseded)
    return None


def _library(names: list[str]) -> str | None:
    if shards.is_dcp_folder(names):
        return DCP
    if any(_ACCELERATE_RNG.match(name) for name in names):
        return ACCELERATE
    return None


def _dcp_whole(path: Path, shards_elsewhere: bool) -> bool:
    """Every shard its `.metadata` lists is here (but those other nodes hold, with `shards_elsewhere`), and
    none is shorter than the storage data places in it: a shard cut short (a full disk, a copy broken
    off) is not whole. Longer is not held against it: the storage data says where chunks end, not that
    nothing follows."""
    try:
        read = shards.metadata_of(path / DCP_METADATA)
    except OSError:  # not there yet, or unreadable this time: asked again at the next poll
        return False
    if read is None:
        return False
    for name in read.listed:
        size = _size(path / name)
        if size is None and not shards_elsewhere:
            return False
        if size is not None and size < read.ends.get(name, 0):
            return False
    return True


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


def _accelerate_whole(entries: list[Path], superseded: bool) -> bool:
    if not any(entry.name == _RANK_0_RNG for entry in entries):
        return False
    if not all(file_whole(entry) for entry in entries if entry.is_file()):
        return False
    return superseded or time.time() - max(entry.stat().st_mtime for entry in entries) >= SETTLE_SECONDS
