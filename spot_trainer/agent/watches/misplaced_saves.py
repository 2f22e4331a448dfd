"""Finds checkpoints a command saves outside CHECKPOINT_DIR, under its working directory.

A script that already has its own `output_dir="outputs"` trains happily and uploads nothing; the
first interruption then loses every step. Saves that appear in the working directory while the
command runs point at the folder the job file should name (`run.checkpoint_dir`), so the warning can
say exactly what to write instead of listing what CHECKPOINT_DIR holds.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ...storage.saves import layouts

MAX_DEPTH = 4  # outputs/run-1/checkpoint-500 is three levels down
MAX_ENTRIES = 20_000  # a workdir holding a dataset must not turn each look (in the poll loop) into a crawl
# Folders that hold installed code or caches, never a script's checkpoints.
_SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages", "wandb", "mlruns"})


@dataclass(frozen=True)
class MisplacedSave:
    folder: Path  # where the newest such checkpoint lies
    name: str  # the checkpoint's own name, e.g. checkpoint-500
    relative: str  # the folder as run.checkpoint_dir takes it: from the working directory, else absolute


def find_misplaced_save(workdir: Path, watched: Path, since: float) -> MisplacedSave | None:
    """The folder holding the highest-step complete checkpoint written at or after `since` (seconds since
    the epoch: code shipped with a pretrained checkpoint-N is no save), under `workdir` or in a subfolder
    of `watched` (`output_dir=$CHECKPOINT_DIR/run1`), whose top level the agent reads itself."""
    best: tuple[int, Path, str] | None = None
    watched = watched.resolve()
    for folder in _holding_checkpoints([workdir.resolve(), watched]):
        if folder == watched:
            continue
        found = layouts.newest_complete(folder)
        if found is not None and _modified_since(found.path, since) and (best is None or found.step > best[0]):
            best = (found.step, folder, found.path.name)
    if best is None:
        return None
    _, folder, name = best
    inside = folder.is_relative_to(workdir.resolve())
    return MisplacedSave(folder, name, folder.relative_to(workdir.resolve()).as_posix() if inside else str(folder))


def _holding_checkpoints(roots: list[Path]) -> list[Path]:
    """The folders with an entry named like a checkpoint, breadth first from each root, at most MAX_ENTRIES
    entries listed, skipping dot folders, caches, virtual envs and checkpoints themselves; each folder once."""
    found: list[Path] = []
    seen: set[Path] = set()
    queue: deque[tuple[Path, int]] = deque((root, 0) for root in roots if root.is_dir())
    listed = 0
    while queue and listed < MAX_ENTRIES:
        folder, depth = queue.popleft()
        if folder in seen:  # the watched folder may lie inside the working directory
            continue
        seen.add(folder)
        subfolders: list[Path] = []
        holds = False
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    listed += 1
                    path = Path(entry.path)
                    # Named like one: only such folders are read again, by the layouts, for a complete one.
                    # Series count in CHECKPOINT_DIR only: here runs such as Lightning's version_<N>/ are not saves.
                    holds = holds or layouts.classify(path, in_series=False) is not None
                    if depth < MAX_DEPTH and entry.is_dir(follow_symlinks=False) and _worth_a_look(path):
                        subfolders.append(path)
                    if listed >= MAX_ENTRIES:
                        break
        except OSError:
            continue
        if holds:
            found.append(folder)
        queue.extend((path, depth + 1) for path in sorted(subfolders))
    return found


def _worth_a_look(path: Path) -> bool:
    if path.name.startswith(".") or path.name in _SKIPPED or (path / "pyvenv.cfg").exists():
        return False
    # A checkpoint is a leaf: its own folder (checkpoint-500/) is no place to look for more.
    return layouts.classify(path, in_series=False) is None


def _modified_since(path: Path, since: float) -> bool:
    try:
        return path.stat().st_mtime >= since
    except OSError:  # pruned while we looked
        return False
