"""What a finished command leaves in CHECKPOINT_DIR besides its checkpoints: the final model from
HF's `save_model()`, a `model_final.pt`, metrics, logs. Once the job is DONE the group goes to zero
and the instance's disk with it, so these go to S3 first, under `<job>/final/`, as they lie."""

from __future__ import annotations

import os
from pathlib import Path

from ..files.regular_files import is_regular
from ..s3.job_keys import FINAL
from . import frameworks, layouts

FINAL_PREFIX = FINAL


def final_output_files(directory: Path) -> dict[str, Path]:
    """Relative POSIX name → file, for everything under `directory` that is no checkpoint of any layout
    (at any depth: `run1/checkpoint-400/`), no `last.ckpt` copy, no dot-name (writes in progress, entries
    set aside, upload views) and no symbolic link (a link to a dataset is not an output)."""
    files: dict[str, Path] = {}
    for folder, subfolders, names in os.walk(directory):  # links to folders are not followed
        base = Path(folder)
        top = base == directory  # a series counts only there (layouts.classify)
        subfolders[:] = sorted(name for name in subfolders if _an_output(base / name, top))
        for name in sorted(names):
            path = base / name
            if _an_output(path, top) and is_regular(path):  # no link, FIFO, socket or device
                files[path.relative_to(directory).as_posix()] = path
    return files


def _an_output(path: Path, top: bool) -> bool:
    return not (path.name.startswith(".") or frameworks.is_copy(path.name)
                or layouts.classify(path, in_series=top))
