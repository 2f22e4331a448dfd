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

A directory a library wrote (torch.distributed.checkpoint, Accelerate's save_state) is whole when
that library's own files say so, whatever its name and layout: see library_saves.py.

Names starting with "." are writes in progress for every layout and are never looked at.

*Strict* completeness asks the content to prove it: ours needs a valid COMMITTED marker, HF,
Lightning and a library's directory keep their checks, generic never qualifies. The built-in
trainer's directory is always read strictly (it always writes the marker), and so is any local entry
newer than S3 at start: a file nobody can vouch for (a stray `step-00000099`) must not become the
job's newest step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import library_saves, series, shards, whole_files
from .lightning_step import archive_step
from .names import MARKER_FILE, parse_step, read_marker
from .regular_files import read_regular_text
from .whole_files import zip_whole

OURS, HF, LIGHTNING, GENERIC, SERIES = "ours", "hf", "lightning", "generic", "series"
HF_STATE_FILE = "trainer_state.json"
INCOMPLETE_PREFIX = ".incomplete-"  # where prepare_for_resume moves what a dead writer left
UNVERIFIED_PREFIX = ".unverified-"  # where set_aside_above moves what nothing proves complete
LIGHTNING_SHARDED_META = "meta.pt"  # written by rank 0 after the shards (lightning 2.6 FSDPStrategy)
LIGHTNING_LAST = re.compile(r"^last(-v?\d+)?\.ckpt$")
_HF_NAME = re.compile(r"^checkpoint-(\d+)$")
_LIGHTNING_NAME = re.compile(r"(?:^|[-_])step=(\d+)(?=[-_.]).*\.ckpt$")
_GENERIC_NAME = re.compile(r"(?:step|iter|iteration|ckpt|checkpoint)[-_=]?(\d+)", re.IGNORECASE)

ACCEPTED = ("step-<N> (file or directory)", "checkpoint-<N>/ (HF Trainer, Accelerate's save_state)",
            "*.ckpt (Lightning: the step in its name or its archive)",
            "a name with a step number such as model_step<N>.pt",
            "a series of names that differ in one rising number, such as model_<epoch>.pth")


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path
    layout: str


def classify(path: Path, *, in_series: bool = True, name: str | None = None) -> tuple[str, int] | None:
    """(layout, step) of one entry, or None when it is no checkpoint (temp entries, what no step is known of).
    `in_series`: a series of its folder counts (an entry of CHECKPOINT_DIR itself, not of a folder below it,
    where numbered runs such as Lightning's `version_<N>/` logs are outputs). `name`: the name the entry
    had before it was set aside."""
    name = name or path.name
    if name.startswith("."):
        return None
    if LIGHTNING_LAST.match(name):
        # Mostly a copy of the newest step file, which wins a tie; with a monitored top-k (the best few by
        # val_loss) the only copy of the newest step.
        return (LIGHTNING, step) if (step := archive_step(path)) is not None else None
    if (step := parse_step(name)) is not None:
        return OURS, step
    if (match := _HF_NAME.match(name)) and path.is_dir():
        return HF, int(match.group(1))
    if match := _LIGHTNING_NAME.search(name):
        return LIGHTNING, int(match.group(1))
    if name.endswith(".ckpt") and (step := archive_step(path)) is not None:  # a filename= without {step}
        return LIGHTNING, step
    if match := _GENERIC_NAME.search(name):
        return GENERIC, int(match.group(1))
    if in_series and (number := series.number_in_series(path)) is not None:
        return SERIES, number
    return None


def newest_complete(directory: str | os.PathLike[str], *, writer_done: bool = False,
                    strict: bool = False, shards_elsewhere: bool = False) -> Checkpoint | None:
    """The highest step whose checkpoint is complete (ours first when two layouts share a step, and a named
    file before a last.ckpt of the same step). With `shards_elsewhere` (several nodes), a checkpoint DCP
    wrote in shards counts once this disk holds its coordinator's part (shards.py)."""
    # Newest first, and stop at the first complete one: each poll checks one or two entries, not all.
    candidates = sorted(_entries(directory), key=lambda item: (-item[0], _PREFERENCE.index(item[1]),
                                                              bool(LIGHTNING_LAST.match(item[2].name))))
    highest = candidates[0][0] if candidates else -1
    for step, layout, path in candidates:
        if _complete(layout, step, path, writer_done or step < highest, strict=strict,
                     shards_elsewhere=shards_elsewhere):
            return Checkpoint(step, path, layout)
    return None


_PREFERENCE = (OURS, HF, LIGHTNING, GENERIC, SERIES)


def _entries(directory: str | os.PathLike[str]) -> list[tuple[int, str, Path]]:
    root = Path(directory)
    if not root.is_dir():
        return []
    return [(kind[1], kind[0], entry) for entry in root.iterdir() if (kind := classify(entry)) is not None]


def newest_entry(directory: str | os.PathLike[str]) -> Checkpoint | None:
    """The entry the layouts take for the highest step, complete or not."""
    entries = _entries(directory)
    if not entries:
        return None
    step, layout, path = max(entries, key=lambda item: item[0])
    return Checkpoint(step, path, layout)


def checkpoints_in(directory: str | os.PathLike[str]) -> list[Checkpoint]:
    """Every entry the layouts take for a checkpoint, complete or not, newest first."""
    return [Checkpoint(step, path, layout) for step, layout, path in sorted(_entries(directory), reverse=True,
                                                                           key=lambda item: item[0])]


def complete_below(directory: str | os.PathLike[str], step: int,
                   keep: Callable[[Path], bool] = lambda path: True) -> list[Checkpoint]:
    """The complete checkpoints below `step` that `keep` accepts (asked first: a stat is cheaper than
    reading a checkpoint's content). Each is superseded by `step`, so the generic rule counts it whole."""
    return [Checkpoint(found, path, layout) for found, layout, path in _entries(directory)
            if found < step and keep(path) and _complete(layout, found, path, superseded=True)]


def published(path: Path, step: int) -> Checkpoint:
    """A checkpoint restored from S3, at the step S3's record gives it. Its layout is read from its name;
    a name that says nothing alone was published as a member of a series (the only layout that needs
    the entries beside it)."""
    kind = classify(path, in_series=False)
    return Checkpoint(step, path, kind[0] if kind else SERIES)


def step_of(path: Path) -> int | None:
    kind = classify(path)
    return kind[1] if kind else None


def set_aside_step(entry: Path) -> int | None:
    """The step of an entry set aside as `.unverified-<name>` or `.incomplete-<name>`; None for any other."""
    for prefix in (UNVERIFIED_PREFIX, INCOMPLETE_PREFIX):
        if entry.name.startswith(prefix):
            kind = classify(entry, in_series=False, name=entry.name.removeprefix(prefix))
            return kind[1] if kind else None
    return None


def _complete(layout: str, step: int, path: Path, superseded: bool, *, strict: bool = False,
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


def _layout_complete(layout: str, step: int, path: Path, superseded: bool, *, strict: bool,
                     shards_elsewhere: bool) -> bool:
    try:
        if layout == LIGHTNING and path.is_dir():  # FSDP's sharded checkpoint: its shards, then meta.pt
            return (bool(library_saves.whole(path, superseded, shards_elsewhere=shards_elsewhere))
                    and zip_whole(path / LIGHTNING_SHARDED_META))
        if layout == LIGHTNING:
            return path.is_file() and zip_whole(path)
        if layout == OURS and path.is_dir() and (path / MARKER_FILE).exists():
            return read_marker(path) is not None  # the built-in trainer's marker decides
        if layout == HF and _hf_state_step(path) == step:
            return True
        if (by_library := library_saves.whole(path, superseded, shards_elsewhere=shards_elsewhere)) is not None:
            return by_library
        if layout == OURS:  # write, then rename: whole on appearance, but nothing proves it
            return not strict and (path.stat().st_size > 0 if path.is_file() else any(path.iterdir()))
        if layout in (GENERIC, SERIES) and path.is_file() and (proven := settled_whole(path, superseded)) is not None:
            return proven
        return layout in (GENERIC, SERIES) and superseded and not strict
    except OSError:  # vanished while we looked (pruned, renamed): not ours to upload now
        return False


def settled_whole(path: Path, superseded: bool) -> bool | None:
    """A single file whose format can prove it (whole_files.py) goes up as soon as it does and has lain
    still for SETTLE_SECONDS (the writer may reopen it), or at once when superseded; one that proves it is
    not whole never goes up. None when the format cannot say: the name's layout decides."""
    proven = whole_files.proof(path)
    if not proven:
        return proven
    try:
        return superseded or time.time() - path.stat().st_mtime >= whole_files.SETTLE_SECONDS
    except OSError:  # vanished while we looked (pruned, renamed): not ours to upload now
        return False


def _hf_state_step(path: Path) -> int | None:
    try:
        state = json.loads(read_regular_text(path / HF_STATE_FILE))
        return int(state["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
    if restored is not None and classify(restored) == (LIGHTNING, step_of(restored)) and restored.is_file():
        _link_last(restored)
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
    """Incomplete once its writer is gone (a Lightning `last.ckpt` too, which a framework reads)."""
    if LIGHTNING_LAST.match(path.name):
        return path.is_file() and not path.is_symlink() and not zip_whole(path)
    kind = classify(path)
    return kind is not None and not _complete(kind[0], kind[1], path, superseded=True)


def _link_last(restored: Path) -> None:
    last = restored.with_name("last.ckpt")
    if last.exists() and os.path.samefile(last, restored):  # restored as last.ckpt, or already linked
        return
    temp = restored.with_name(f".last.ckpt.{os.getpid()}")
    temp.unlink(missing_ok=True)
    os.link(restored, temp)
    os.replace(temp, last)
