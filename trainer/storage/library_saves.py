"""Checkpoint directories a library wrote whose own files tell when they are whole, whatever the
directory is called (`step-<N>`, `checkpoint-<N>`, `step_<N>`):

    torch.distributed.checkpoint   FSDP's and torchtitan's `step-<N>/`: every rank's shards
                                   (`__<rank>_<i>.distcp`) first, then `.metadata`, which the
                                   coordinator writes last through a rename (torch 2.13
                                   FileSystemWriter.finish): whole once `.metadata` is there
    Accelerate's save_state        the diffusers training scripts' `checkpoint-<N>/`: model, optimizer,
                                   scheduler and samplers first, each rank's `random_states_<rank>.pkl`
                                   after them (accelerate 1.15 save_accelerator_state): whole once every
                                   such file is a whole torch archive and the directory has been still
                                   for SETTLE_SECONDS, since objects registered with
                                   `register_for_checkpointing` follow the RNG state at once
"""

from __future__ import annotations

import re
import time
import zipfile
from pathlib import Path

DCP, ACCELERATE = "torch.distributed.checkpoint", "accelerate"
DCP_METADATA = ".metadata"
_DCP_SHARD = re.compile(r"\.distcp$")
_ACCELERATE_RNG = re.compile(r"^random_states_\d+\.pkl$")
SETTLE_SECONDS = 2.0


def library_of(path: Path) -> str | None:
    """Which library wrote this directory, by the files only it writes; None for anything else."""
    try:
        names = [entry.name for entry in path.iterdir()] if path.is_dir() else []
    except OSError:  # pruned while we looked
        return None
    if DCP_METADATA in names or any(_DCP_SHARD.search(name) for name in names):
        return DCP
    if any(_ACCELERATE_RNG.match(name) for name in names):
        return ACCELERATE
    return None


def whole(path: Path, superseded: bool) -> bool | None:
    """Whether a library's directory is whole (`superseded`: a newer one has begun, or its writer is
    gone); None when no library's files show, so the directory's layout decides alone."""
    library = library_of(path)
    if library == DCP:
        return (path / DCP_METADATA).is_file()
    if library == ACCELERATE:
        return _accelerate_whole(path, superseded)
    return None


def _accelerate_whole(path: Path, superseded: bool) -> bool:
    entries = list(path.iterdir())
    states = [entry for entry in entries if _ACCELERATE_RNG.match(entry.name)]
    if not all(zip_readable(state) for state in states):
        return False
    return superseded or time.time() - max(entry.stat().st_mtime for entry in entries) >= SETTLE_SECONDS


def zip_readable(path: Path) -> bool:
    """torch.save writes a zip archive: its central directory, at the very end, comes last."""
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
