"""What a finished command leaves in CHECKPOINT_DIR besides its checkpoints: the final model from
HF's `save_model()`, a `model_final.pt`, metrics, logs. Once the job is DONE the group goes to zero
and the instance's disk with it, so these go to S3 first, under `<job>/final/`, as they lie."""

from __future__ import annotations

from pathlib import Path

from . import layouts

FINAL_PREFIX = "final/"


def final_output_files(directory: Path) -> dict[str, Path]:
    """Relative POSIX name → file, for every entry of `directory` that is no checkpoint of any layout,
    no `last.ckpt` copy and no dot-name (writes in progress, entries set aside, upload views)."""
    if not directory.is_dir():
        return {}
    files: dict[str, Path] = {}
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith(".") or layouts.LIGHTNING_LAST.match(entry.name) or layouts.classify(entry):
            continue
        inside = sorted(entry.rglob("*")) if entry.is_dir() else [entry]
        for path in inside:
            relative = path.relative_to(directory)
            if path.is_file() and not any(part.startswith(".") for part in relative.parts):
                files[relative.as_posix()] = path
    return files
