"""Checkpoint layouts: which entries of CHECKPOINT_DIR are checkpoints, of which step, and whether
each is complete enough to upload. The agent asks this module; nothing else knows the layouts.

    ours       step-<N>                 complete on appearance (write, then rename), unless empty; a
                                        directory that carries a COMMITTED marker only while it is valid
    hf         checkpoint-<N>/          HF Trainer writes in place, trainer_state.json last
                                        (transformers 5.23 `_save_checkpoint`): complete once that
                                        file parses and names global_step N, or, with no such
                                        file, once Accelerate's save_state in it is whole
    lightning  <...>step=<N><...>.ckpt  torch.save archives (Lightning's default file name carries
               or any other <...>.ckpt  the step; another name's step is read from the archive):
                                        complete once the zip's central directory reads;
                                        last*.ckpt counts only for a step no other file holds
    generic    any other name with step/iter/ckpt/checkpoint and a number (`checkpoint_40.pt`,
                                        `iter-500/`): a single file whose format proves it whole
                                        (whole_files.py) once it does and has lain still 2 s; any other
                                        once a higher step appears or the command has exited
    series     names that differ only in one integer, written one after another (`model_<epoch>.pth`,
                                        `epoch_<N>/`, `weights.<N>-<loss>.hdf5`; series.py): from
                                        the second member on, complete as generic ones are
    fixed      any other name whose file states its step inside (`ckpt.pt` holding iter_num,
                                        `checkpoint.pth.tar` holding epoch, `weights/last.pt`;
                                        fixed_names.py): with the whole files beside it, once all
                                        prove whole and have lain still 2 s; a private copy goes up

Each layout is one entry of frameworks.py (its naming, its step, its rule of wholeness, what a resume from
it needs beside it, the words for its names), and this module classifies, judges and prepares a resume
through the entries alone. A directory a library wrote (torch.distributed.checkpoint,
Accelerate's save_state) is whole when that library's own files say so, whatever its name and layout: see
library_saves.py.

Names starting with "." are writes in progress for every layout and are never looked at.

*Strict* completeness asks the content to prove it: ours needs a valid COMMITTED marker, HF,
Lightning and a library's directory keep their checks, generic never qualifies. The built-in
trainer's directory is always read strictly (it always writes the marker), and so is any local entry
newer than S3 at start: a file nobody can vouch for (a stray `step-00000099`) must not become the
job's newest step.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ..files import whole_files
from ..files.regular_files import is_regular
from . import fixed_names, frameworks, library_saves, shards
from .frameworks import HF_STATE_FILE as HF_STATE_FILE  # named from here by the layouts' callers and tests
from .frameworks import LIGHTNING_SHARDED_META as LIGHTNING_SHARDED_META
from .frameworks import Judged
from .layout_kinds import Classified as Classified  # named from here by the layouts' callers and tests
from .layout_kinds import Layout as Layout

INCOMPLETE_PREFIX = ".incomplete-"  # where prepare_for_resume moves what a dead writer left
UNVERIFIED_PREFIX = ".unverified-"  # where set_aside_above moves what nothing proves complete


def accepted() -> tuple[str, ...]:
    """The names the layouts know, in a user's words, one per framework in the order they are asked."""
    return tuple(framework.accepts for framework in frameworks.frameworks() if framework.accepts)


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path
    layout: StrEnum  # a Layout, or a registered framework's own (layout_kinds.py)


def classify(path: Path, *, in_series: bool = True, name: str | None = None) -> Classified | None:
    """The layout and step of one entry, or None when it is no checkpoint (temp entries, what no step is known of).
    `in_series`: a series of its folder counts (an entry of CHECKPOINT_DIR itself, not of a folder below it,
    where numbered runs such as Lightning's `version_<N>/` logs are outputs). `name`: the name the entry
    had before it was set aside."""
    name = name or path.name
    if name.startswith("."):
        return None
    return frameworks.read_name(name, path, in_series=in_series)


def newest_complete(directory: str | os.PathLike[str], *, writer_done: bool = False,
                    strict: bool = False, shards_elsewhere: bool = False) -> Checkpoint | None:
    """The highest step whose checkpoint is complete (ours first when two layouts share a step, and a named
    file before a last.ckpt of the same step). With `shards_elsewhere` (several nodes), a checkpoint DCP
    wrote in shards counts once this disk holds its coordinator's part (shards.py)."""
    # Newest first, and stop at the first complete one: each poll checks one or two entries, not all.
    candidates = sorted(_entries(directory), key=lambda found: (-found.step, frameworks.preference(found.layout),
                                                               frameworks.is_copy(found.path.name)))
    highest = candidates[0].step if candidates else -1
    for found in candidates:
        if _complete(found.layout, found.step, found.path, writer_done or found.step < highest, strict=strict,
                     shards_elsewhere=shards_elsewhere):
            return found
    return None


def _entries(directory: str | os.PathLike[str]) -> list[Checkpoint]:
    """Every entry the layouts take for a checkpoint, complete or not, in no order."""
    root = Path(directory)
    if not root.is_dir():
        return []
    return [Checkpoint(kind.step, entry, kind.layout) for entry in root.iterdir()
            if (kind := classify(entry)) is not None]


def newest_entry(directory: str | os.PathLike[str]) -> Checkpoint | None:
    """The entry the layouts take for the highest step, complete or not."""
    return max(_entries(directory), key=lambda found: found.step, default=None)


def checkpoints_in(directory: str | os.PathLike[str]) -> list[Checkpoint]:
    """Every entry the layouts take for a checkpoint, complete or not, newest first."""
    return sorted(_entries(directory), key=lambda found: found.step, reverse=True)


def complete_below(directory: str | os.PathLike[str], step: int,
                   keep: Callable[[Path], bool] = lambda path: True) -> list[Checkpoint]:
    """The complete checkpoints below `step` that `keep` accepts (asked first: a stat is cheaper than
    reading a checkpoint's content). Each is superseded by `step`, so the generic rule counts it whole."""
    return [found for found in _entries(directory) if found.step < step and keep(found.path)
            and _complete(found.layout, found.step, found.path, superseded=True)]


def published(path: Path, step: int) -> Checkpoint:
    """A checkpoint restored from S3, at the step S3's record gives it. Its layout is read from its name;
    a name that says nothing alone was published as a fixed-name checkpoint when the file states its step,
    else as a member of a series (the only other layout that needs the entries beside it)."""
    kind = classify(path, in_series=False)
    if kind is None and fixed_names.fixed_step(path.name, path) is not None:
        return Checkpoint(step, path, Layout.FIXED)
    return Checkpoint(step, path, kind.layout if kind else Layout.SERIES)


def fixed_entries(path: Path) -> list[Path] | None:
    """The entries a fixed-name checkpoint goes up and comes back with, `path` first (fixed_names.py); None
    for a checkpoint of any other layout."""
    kind = classify(path)
    return frameworks.fixed_set(path) if kind is not None and kind.layout == Layout.FIXED else None


def step_of(path: Path) -> int | None:
    kind = classify(path)
    return kind.step if kind else None


def set_aside_step(entry: Path) -> int | None:
    """The step of an entry set aside as `.unverified-<name>` or `.incomplete-<name>`; None for any other."""
    for prefix in (UNVERIFIED_PREFIX, INCOMPLETE_PREFIX):
        if entry.name.startswith(prefix):
            kind = classify(entry, in_series=False, name=entry.name.removeprefix(prefix))
            return kind.step if kind else None
    return None


def _complete(layout: StrEnum, step: int, path: Path, superseded: bool, *, strict: bool = False,
              shards_elsewhere: bool = False) -> bool:
    """The layout's own rule, and every folder DCP wrote inside the checkpoint whole (HF's and
    Accelerate's FSDP `pytorch_model_fsdp_0/` are written before the files their rule reads)."""
    return (_layout_complete(layout, step, path, superseded, strict=strict, shards_elsewhere=shards_elsewhere)
            and _inner_dcp_whole(path, shards_elsewhere))


def _inner_dcp_whole(path: Path, shards_elsewhere: bool) -> bool:
    try:
        inner = [folder for folder in shards.dcp_folders(path) if folder]
        return all(library_saves.whole(path / folder, True, shards_elsewhere=shards_elsewhere) for folder in inner)
    except OSError:
        return False


def _layout_complete(layout: StrEnum, step: int, path: Path, superseded: bool, *, strict: bool,
                     shards_elsewhere: bool) -> bool:
    try:
        return frameworks.framework_of(layout).whole(Judged(step, path, superseded, strict, shards_elsewhere))
    except OSError:  # vanished while we looked (pruned, renamed): not ours to upload now
        return False


def describe(directory: str | os.PathLike[str], limit: int = 8) -> str:
    """What a directory holds, for a warning: 'a.txt, model.bin, … (12 entries)' or 'nothing'."""
    root = Path(directory)
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir()) if root.is_dir() else []
    if not names:
        return "nothing"
    shown = ", ".join(names[:limit]) + (", …" if len(names) > limit else "")
    return f"{shown} ({len(names)} entries)"


def prepare_for_resume(directory: Path, restored: Path | None) -> list[str]:
    """Make CHECKPOINT_DIR look as the framework would have left it had nothing died: entries the
    writer never finished are moved aside (HF's get_last_checkpoint would pick a newer half-written
    checkpoint-N and fail to load it), and a Lightning step file gets `last.ckpt` beside it for
    `ckpt_path="last"`. Returns the names moved aside; they stay as `.incomplete-<name>`. `restored` itself
    stays: it was checked against S3's manifest or proved whole here, and a node's share of a sharded step
    (checkpoint_restore.py) lacks, on purpose, the shards only other ranks read."""
    hidden = _hide_unfinished(Path(directory), restored)
    if restored is not None and (kind := classify(restored)) is not None:
        if (prepare := frameworks.framework_of(kind.layout).before_resume) is not None:
            prepare(restored)
    return hidden


def _hide_unfinished(directory: Path, keep: Path | None) -> list[str]:
    if not directory.is_dir():
        return []
    kept = keep.name if keep is not None and keep.resolve().parent == directory.resolve() else None
    unfinished = [path for path in directory.iterdir() if path.name != kept and _unfinished(path)]
    for path in unfinished:
        _move_aside(path, INCOMPLETE_PREFIX)
    return sorted(path.name for path in unfinished)


def set_aside_above(directory: Path, step: int | None) -> list[str]:
    """Move every checkpoint entry newer than the restore point `step` (all, when None) to
    `.unverified-<name>`: at start nothing newer than the restore point is proven, and a framework's
    own resume, or our upload, would otherwise take it for the newest. Returns the names moved."""
    if not directory.is_dir():
        return []
    above = [path for path in directory.iterdir() if (found := step_of(path)) is not None
             and (step is None or found > step)]
    for path in above:
        _move_aside(path, UNVERIFIED_PREFIX)
    return sorted(path.name for path in above)


def _move_aside(path: Path, prefix: str) -> None:
    aside = path.with_name(f"{prefix}{path.name}")
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside)
    else:
        aside.unlink(missing_ok=True)
    os.replace(path, aside)


def _unfinished(path: Path) -> bool:
    """Incomplete once its writer is gone (a framework's copy of a save too, which the framework reads)."""
    if (copied := frameworks.copy_of(path.name)) is not None:
        return copied.copy_whole is not None and not copied.copy_whole(path)
    kind = classify(path)
    if kind is None:  # a file kept under one name that a dead writer left torn states no step: its format tells
        return not path.name.startswith(".") and is_regular(path) and whole_files.proof(path) is False
    return not _complete(kind.layout, kind.step, path, superseded=True)
