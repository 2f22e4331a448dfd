"""Each framework's checkpoints as one entry: how its saves are named, the step a name holds, when a save
is whole, and where its integration lives. The layouts (layouts.py) classify and judge CHECKPOINT_DIR
through these entries alone, so a framework that names its saves its own way is one `Framework` passed to
`register`, plus its tests.

Entries are asked in order and the first whose naming reads a step takes the entry: ours, HF, Lightning,
then any registered framework, then the two catch-alls (a name with a step number, a series), which come
last whatever is registered. The same order breaks a tie when two layouts hold one step. A save a library
wrote (DCP, Accelerate's save_state) is judged by that library's own files within a framework's rule
(library_saves.py); that is no naming and has no entry here.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ...integrations.checkpoint_names import LIGHTNING_LAST, LIGHTNING_LAST_NAMES
from ..files import whole_files
from ..files.names import MARKER_FILE, parse_step, read_marker
from ..files.regular_files import read_regular_text
from ..files.whole_files import zip_whole
from . import fixed_names, library_saves, series
from .layout_kinds import Classified, Layout
from .lightning_step import archive_step

HF_STATE_FILE = "trainer_state.json"
LIGHTNING_SHARDED_META = "meta.pt"  # written by rank 0 after the shards (lightning 2.6 FSDPStrategy)
_HF_NAME = re.compile(r"^checkpoint-(\d+)$")
_LIGHTNING_NAME = re.compile(r"(?:^|[-_])step=(\d+)(?=[-_.]).*\.ckpt$")
_GENERIC_NAME = re.compile(r"(?:step|iter|iteration|ckpt|checkpoint)[-_=]?(\d+)", re.IGNORECASE)

StepReader = Callable[[str, Path], int | None]  # (name, entry) → the step it holds, or None: not this naming


def _claims_nothing(name: str) -> bool:
    return False


@dataclass(frozen=True)
class Naming:
    """One way a framework names a save: the step a name holds (read from the name, or from the entry where
    the name says none). `claims`: a name this naming owns even when it reads no step, so no later naming
    reads it either (a `last.ckpt` whose archive holds no step is no checkpoint at all)."""

    step: StepReader
    claims: Callable[[str], bool] = _claims_nothing


@dataclass(frozen=True)
class Judged:
    """A save as its framework's rule judges it."""

    step: int
    path: Path
    superseded: bool  # a newer step has begun, or its writer is gone
    strict: bool  # the content must prove it whole: nothing else vouches for it
    shards_elsewhere: bool  # several nodes: the other nodes hold the rest of a DCP save's shards


@dataclass(frozen=True)
class Framework:
    layout: StrEnum  # the tag its checkpoints carry (Checkpoint.layout): a Layout, or a registered framework's own
    namings: tuple[Naming, ...]
    whole: Callable[[Judged], bool]  # may raise OSError: a save that vanished while judged is not whole
    integration: str = ""  # its callbacks and patches, a module of the runtime ('' when it needs none)
    copies: re.Pattern[str] | None = None  # names of a copy of another save: they lose a tie of steps
    resume_hint: str = ""  # what a script that started over must do to resume, in this framework's words
    catch_all: bool = False  # asked after every framework, registered ones included
    in_folder: bool = False  # its step is read from the entries beside it: only in CHECKPOINT_DIR itself
    accepts: str = ""  # its names in a user's words, for the warning that the folder holds none we know
    copy_whole: Callable[[Path], bool] | None = None  # when a copy (`copies`) is whole; a broken one is set aside
    # What a resume from one of its saves needs beside that save, as the framework would have left it.
    before_resume: Callable[[Path], None] | None = None


def _library_verdict(save: Judged) -> bool | None:
    return library_saves.whole(save.path, save.superseded, shards_elsewhere=save.shards_elsewhere)


def _ours_whole(save: Judged) -> bool:
    """The built-in trainer's marker decides; else write, then rename: whole on appearance, but nothing
    proves it."""
    if save.path.is_dir() and (save.path / MARKER_FILE).exists():
        return read_marker(save.path) is not None
    if (by_library := _library_verdict(save)) is not None:
        return by_library
    return not save.strict and (save.path.stat().st_size > 0 if save.path.is_file() else any(save.path.iterdir()))


def _hf_whole(save: Judged) -> bool:
    """HF Trainer writes in place, trainer_state.json last; without it, Accelerate's save_state may be whole."""
    return _hf_state_step(save.path) == save.step or bool(_library_verdict(save))


def _hf_state_step(path: Path) -> int | None:
    try:
        state = json.loads(read_regular_text(path / HF_STATE_FILE))
        return int(state["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _lightning_whole(save: Judged) -> bool:
    """A torch.save archive once its zip's central directory reads; FSDP's sharded folder once its shards
    are whole and meta.pt after them."""
    if save.path.is_dir():
        return bool(_library_verdict(save)) and zip_whole(save.path / LIGHTNING_SHARDED_META)
    return save.path.is_file() and zip_whole(save.path)


def _step_named_whole(save: Judged) -> bool:
    """A name with a step says nothing of its writer: a file whose format proves it whole, else once
    superseded (never when strict)."""
    if (by_library := _library_verdict(save)) is not None:
        return by_library
    if save.path.is_file() and (proven := settled_whole(save.path, save.superseded)) is not None:
        return proven
    return save.superseded and not save.strict


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


def matched_step(pattern: re.Pattern[str]) -> StepReader:
    """A naming whose step is the pattern's first group, found anywhere in the name."""
    def step(name: str, path: Path) -> int | None:
        return int(match.group(1)) if (match := pattern.search(name)) else None
    return step


def _hf_step(name: str, path: Path) -> int | None:
    return int(match.group(1)) if (match := _HF_NAME.match(name)) and path.is_dir() else None


def _lightning_copy_step(name: str, path: Path) -> int | None:
    # Mostly a copy of the newest step file, which wins a tie; with a monitored top-k (the best few by
    # val_loss) the only copy of the newest step.
    return archive_step(path) if LIGHTNING_LAST_NAMES.match(name) else None


def _lightning_copy_whole(path: Path) -> bool:
    """`last.ckpt` is a file Lightning reads (ckpt_path="last"): whole once its archive reads; a link to a
    save is whole as that save is judged."""
    return not path.is_file() or path.is_symlink() or zip_whole(path)


def _link_lightning_last(restored: Path) -> None:
    """A step file restored gets `last.ckpt` beside it (a hard link), for `ckpt_path="last"`; a sharded
    folder, which Lightning resumes from by its own path, gets none."""
    if not restored.is_file():
        return
    last = restored.with_name(LIGHTNING_LAST)
    if last.exists() and os.path.samefile(last, restored):  # restored as last.ckpt, or already linked
        return
    temp = restored.with_name(f".{LIGHTNING_LAST}.{os.getpid()}")
    temp.unlink(missing_ok=True)
    os.link(restored, temp)
    os.replace(temp, last)


def _lightning_archive_step(name: str, path: Path) -> int | None:
    return archive_step(path) if name.endswith(".ckpt") else None  # a filename= without {step}


OURS = Framework(Layout.OURS, (Naming(lambda name, path: parse_step(name)),), _ours_whole,
                 accepts="step-<N> (file or directory)")
HF = Framework(Layout.HF, (Naming(_hf_step),), _hf_whole, integration="integrations.hf",
               accepts="checkpoint-<N>/ (HF Trainer, Accelerate's save_state)",
               resume_hint="pass resume_from_checkpoint=get_last_checkpoint(output_dir) to trainer.train()")
LIGHTNING = Framework(
    Layout.LIGHTNING,
    (Naming(_lightning_copy_step, claims=lambda name: bool(LIGHTNING_LAST_NAMES.match(name))),
     Naming(matched_step(_LIGHTNING_NAME)), Naming(_lightning_archive_step)),
    _lightning_whole, integration="integrations.lightning", copies=LIGHTNING_LAST_NAMES,
    resume_hint='pass ckpt_path="last" to trainer.fit()', copy_whole=_lightning_copy_whole,
    accepts="*.ckpt (Lightning: the step in its name or its archive)",
    before_resume=_link_lightning_last)
GENERIC = Framework(Layout.GENERIC, (Naming(matched_step(_GENERIC_NAME)),), _step_named_whole, catch_all=True,
                    accepts="a name with a step number such as model_step<N>.pt")
SERIES = Framework(Layout.SERIES, (Naming(lambda name, path: series.number_in_series(path)),), _step_named_whole,
                   catch_all=True, in_folder=True,
                   accepts="a series of names that differ in one rising number, such as model_<epoch>.pth")



def _fixed_whole(save: Judged) -> bool:
    """Every entry of the set whole by its format, at the step its newest states (fixed_names.py); its
    format proves it, so strict or not is all one."""
    return fixed_names.set_whole(fixed_set(save.path), save.step, save.superseded)


def fixed_set(primary: Path) -> list[Path]:
    """The entries that go up and come back with the fixed-name checkpoint `primary`, `primary` first."""
    return fixed_names.members(primary, _claimed_elsewhere)


def _claimed_elsewhere(entry: Path) -> bool:
    """A checkpoint of another layout (an HF `checkpoint-N/` beside a `ckpt.pt`), or a framework's copy."""
    return is_copy(entry.name) or (kind := read_name(entry.name, entry, in_series=True)) is not None \
        and kind.layout != Layout.FIXED


FIXED = Framework(Layout.FIXED, (Naming(fixed_names.fixed_step),), _fixed_whole, catch_all=True, in_folder=True,
                  accepts="one file or folder rewritten under its own name, with the step inside "
                          "(ckpt.pt holding iter_num, checkpoint.pth.tar holding epoch)",
                  resume_hint="resume from the file when it exists: RESUME_FROM names it")

_REGISTRY: list[Framework] = [OURS, HF, LIGHTNING, GENERIC, SERIES, FIXED]


def register(framework: Framework) -> None:
    """Add a framework's entry: asked after those before it and before the catch-alls."""
    if any(known.layout == framework.layout for known in _REGISTRY):
        raise ValueError(f"a framework with layout {framework.layout!r} is registered already")
    at = next((i for i, known in enumerate(_REGISTRY) if known.catch_all and not framework.catch_all),
              len(_REGISTRY))
    _REGISTRY.insert(at, framework)


def unregister(layout: StrEnum) -> None:
    """Remove a registered framework's entry (a test's, once it is done)."""
    _REGISTRY[:] = [known for known in _REGISTRY if known.layout != layout]


def frameworks() -> tuple[Framework, ...]:
    """Every entry, in the order names are read and ties broken."""
    return tuple(_REGISTRY)


def framework_of(layout: StrEnum) -> Framework:
    return next(known for known in _REGISTRY if known.layout == layout)


def read_name(name: str, path: Path, *, in_series: bool) -> Classified | None:
    """The layout and step of the first naming that reads a step from `name` (the entry at `path`); an entry the job
    file names is its fixed-name checkpoint, whatever another naming would read in its name."""
    if fixed_names.is_named(name):
        step = fixed_names.fixed_step(name, path) if in_series else None
        return Classified(Layout.FIXED, step) if step is not None else None
    for framework in _REGISTRY:
        if framework.in_folder and not in_series:
            continue
        for naming in framework.namings:
            if (step := naming.step(name, path)) is not None:
                return Classified(framework.layout, step)
            if naming.claims(name):
                return None
    return None


def copy_of(name: str) -> Framework | None:
    """The framework whose name for a copy of another save `name` is (Lightning's last.ckpt), or None."""
    return next((known for known in _REGISTRY if known.copies is not None and known.copies.match(name)), None)


def is_copy(name: str) -> bool:
    return copy_of(name) is not None


def preference(layout: StrEnum) -> int:
    """Where a layout stands when two hold one step: the lower first."""
    return next(i for i, known in enumerate(_REGISTRY) if known.layout == layout)
