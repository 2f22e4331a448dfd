"""The checkpoint directory contract, torch-free: a checkpoint is an entry `step-<N>` (file or
directory) directly in CHECKPOINT_DIR; names starting with "." are writes still in progress.

The agent reads directories with this alone, so it never pays for importing torch.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .regular_files import read_regular_text

_STEP_NAME = re.compile(r"^step-(\d+)$")
MARKER_FILE = "COMMITTED"  # JSON {"step", "files": {name: size}}, written last into a step-N directory


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def parse_step(name: str) -> int | None:
    match = _STEP_NAME.match(name)
    return int(match.group(1)) if match else None


def list_checkpoints(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """Every `step-N` entry (file or directory), oldest first. Temp entries (".…") are skipped."""
    root = Path(directory)
    if not root.is_dir():
        return []
    found = [(step, entry) for entry in root.iterdir() if (step := parse_step(entry.name)) is not None]
    return sorted(found, key=lambda item: item[0])


def latest_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The highest `step-N` entry, whoever wrote it; None when there is none."""
    entries = list_checkpoints(directory)
    return entries[-1][1] if entries else None


def read_marker(path: Path) -> dict[str, Any] | None:
    """The commit marker if it is well formed and every file it lists has the recorded size."""
    try:
        marker: dict[str, Any] = json.loads(read_regular_text(path / MARKER_FILE))
        files = marker["files"]
        if marker["step"] != parse_step(path.name) or not files:
            return None
        if any((path / name).stat().st_size != size for name, size in files.items()):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return marker

