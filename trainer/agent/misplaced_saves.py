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

from ..storage import layouts

MAX_DEPTH = 4  # outputs/run-1/checkpoint-500 is three levels down
MAX_DIRECTORIES = 2000  # a workdir holding a dataset must not turn each look into a crawl
# Folders that hold installed code or caches, never a script's checkpoints.
_SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages", "wandb", "mlruns"})


@dataclass(frozen=True)
class MisplacedSave:
    folder: Path  # where the newest such checkpoint lies
    name: str  # the checkpoint's own name, e.g. checkpoint-500
    relative: str  # the folder from the working directory, as run.checkpoint_dir takes it


def find_misplaced_save(workdir: Path, watched: Path, since: float) -> MisplacedSave | None:
    """The folder under `workdir` holding the highest-step complete checkpoint written at or after `since`
    (seconds since the epoch, the command's start: code shipped with a pretrained checkpoint-N is no save)."""
    best: tuple[int, Path, str] | None = None
    if workdir.resolve() == watched.resolve():
        return None
    for folder in _folders(workdir, watched.resolve()):
        found = layouts.newest_complete(folder)
        if found is not None and _modified_since(found.path, since) and (best is None or found.step > best[0]):
            best = (found.step, folder, found.path.name)
    if best is None:
        return None
    _, folder, name = best
    return MisplacedSave(folder, name, folder.relative_to(workdir).as_posix())


def _folders(workdir: Path, watched: Path) -> list[Path]:
    """Breadth first, at most MAX_DIRECTORIES folders, skipping dot folders, caches and virtual envs."""
    found: list[Path] = []
    queue: deque[tuple[Path, int]] = deque([(workdir, 0)])
    while queue and len(found) < MAX_DIRECTORIES:
        folder, depth = queue.popleft()
        found.append(folder)
        if depth == MAX_DEPTH:
            continue
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False) and _worth_a_look(path, watched):
                queue.append((path, depth + 1))
    return found


def _worth_a_look(path: Path, watched: Path) -> bool:
    if path.name.startswith(".") or path.name in _SKIPPED or (path / "pyvenv.cfg").exists():
        return False
    # A checkpoint is a leaf: its own folder (checkpoint-500/) is no place to look for more.
    return layouts.classify(path) is None and path.resolve() != watched


def _modified_since(path: Path, since: float) -> bool:
    try:
        return path.stat().st_mtime >= since
    except OSError:  # pruned while we looked
        return False
