"""A checkpoint kept under a fixed name and rewritten at every save: `ckpt.pt`, `checkpoint.pth.tar` beside its
`model_best.pth.tar` copy, YOLO's `weights/` with `last.pt` and `best.pt`, weights beside a `state.json`.

Its name says nothing; its step is what the file states (stated_step.py). The checkpoint is every such entry
of CHECKPOINT_DIR together, as the script left them at that save: the entries that state a step, and beside
them the files no layout claims whose format proves them whole (a `model_best.pth.tar` whose archive holds
an older epoch, a `model.safetensors` beside the `state.json` that names the step). The set is whole once
every member's format proves it and the newest has lain still SETTLE_SECONDS (the script may be writing its
companion next), and at the step of its member that states the highest.

`torch.save` to an existing name truncates that file and rewrites it: the bytes that go up are a private copy
taken once the set proved whole, judged again as copied (staging.copy_set), never a link to the file the
script rewrites next.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from ..checkpoint_versions import version_of
from ..files import whole_files
from ..files.regular_files import is_regular, read_regular_text
from .stated_step import step_in

FRAMEWORK_FILES = frozenset({"trainer_state.json"})  # HF's own record of a run: never a script's fixed save
SETTLE_SECONDS = whole_files.SETTLE_SECONDS
Claimed = Callable[[Path], bool]  # whether any other layout takes an entry for a checkpoint


KERAS_SUFFIX = ".keras"  # a whole model with its optimizer, saved over itself by ModelCheckpoint("model.keras")
_named: set[str] = set()  # the entries the job file names its checkpoint (run.checkpoint_files)


def name_entries(names: tuple[str, ...] | list[str]) -> None:
    """The entries of CHECKPOINT_DIR the job names as its checkpoint: each is one whatever another layout
    would read in its name, and goes by version where it states no step."""
    _named.clear()
    _named.update(names)


def named() -> frozenset[str]:
    return frozenset(_named)


def is_named(name: str) -> bool:
    return name in _named


def fixed_step(name: str, path: Path) -> int | None:
    """The step a fixed-name entry states: a file's own, a folder's highest among its files. Where it states
    none, a named entry or a Keras archive goes by its version (checkpoint_versions.py); any other is None
    (then it may still go up beside one that does, as a companion)."""
    if name.startswith(".") or (name in FRAMEWORK_FILES and not is_named(name)):
        return None
    files = [path] if is_regular(path) else _files_of(path) if path.is_dir() and not path.is_symlink() else []
    stated = max((step for file in files if (step := step_in(file)) is not None), default=None)
    if stated is not None or not files or not (is_named(name) or name.endswith(KERAS_SUFFIX)):
        return stated
    try:
        return version_of(max(file.stat().st_mtime for file in files))
    except OSError:  # gone while we looked
        return None


def members(primary: Path, claimed: Claimed) -> list[Path]:
    """Every entry beside `primary` that goes up with it, `primary` first: those that state a step, and the
    files whose format proves them whole that no layout (`claimed`) takes for a checkpoint of its own."""
    beside = sorted(entry for entry in primary.parent.iterdir() if entry != primary and _member(entry, claimed))
    return [primary, *beside]


def _member(entry: Path, claimed: Claimed) -> bool:
    if entry.name.startswith(".") or entry.name in FRAMEWORK_FILES or claimed(entry):
        return False
    return fixed_step(entry.name, entry) is not None or (is_regular(entry) and _self_describing(entry))


def _self_describing(path: Path) -> bool:
    return path.suffix == ".json" or whole_files.format_of(path) is not None


def set_whole(entries: list[Path], step: int, superseded: bool) -> bool:
    """Every member whole by its own format, the first stating `step` and none a higher one, and (unless its
    writer has stopped) none written in the last SETTLE_SECONDS."""
    stated = [fixed_step(entry.name, entry) for entry in entries]  # read once: the script may rewrite them
    if stated[0] != step or max(found for found in stated if found is not None) != step:
        return False
    files = [file for entry in entries for file in ([entry] if is_regular(entry) else _files_of(entry))]
    if not all(_file_whole(file) for file in files):
        return False
    return superseded or time.time() - max(file.stat().st_mtime for file in files) >= SETTLE_SECONDS


def copies_whole(copies: list[Path], step: int) -> bool:
    """Private copies of a set, judged as copied: whole as the set was, at the same `step`, and every zip's
    members matching their recorded CRC-32 (a copy that caught a rewrite half old, half new fails it)."""
    zips = [file for entry in copies for file in ([entry] if is_regular(entry) else _files_of(entry))
            if whole_files.format_of(file) is whole_files.Format.ZIP]
    return set_whole(copies, step, superseded=True) and all(whole_files.zip_crcs_match(file) for file in zips)


def _file_whole(path: Path) -> bool:
    """A self-describing format must prove it; a JSON file must parse; a folder's other files are taken as
    they are (a `results.csv` beside YOLO's weights)."""
    if path.suffix == ".json":
        try:
            json.loads(read_regular_text(path))
            return True
        except (OSError, ValueError):
            return False
    return whole_files.proof(path) is not False


def _files_of(folder: Path) -> list[Path]:
    return sorted(entry for entry in folder.iterdir() if not entry.name.startswith(".") and is_regular(entry))
