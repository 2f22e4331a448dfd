"""A private, unprunable view of a checkpoint for the time of its upload.

Trainers keep only their newest K checkpoints and delete older ones while an upload of one of them may
still be running; s3transfer opens each part lazily and hashing reads the file again, so an upload
slower than K checkpoint intervals would fail every time. Hard links into `.upload-<name>/` beside
the checkpoint keep its bytes for as long as the upload needs them, at no copy cost: no trainer
prunes dot-names, and the layouts never see them as checkpoints.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from .regular_files import is_regular

STAGING_PREFIX = ".upload-"
# A filesystem that refuses hard links: upload the original, as without staging.
_NO_LINKS = {errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK}


def stage(checkpoint: Path) -> Path | None:
    """Hard links of `checkpoint` (a file or a tree) under `.upload-<name>/<name>`; None where the
    filesystem has no hard links. Raises FileNotFoundError when it was pruned before it was linked."""
    staging = checkpoint.with_name(STAGING_PREFIX + checkpoint.name)
    _remove(staging)
    staging.mkdir()
    target = staging / checkpoint.name
    try:
        _link_tree(checkpoint, target) if checkpoint.is_dir() else os.link(checkpoint, target)
    except OSError as error:
        _remove(staging)
        if error.errno in _NO_LINKS:
            return None
        raise
    return target


def _link_tree(source: Path, target: Path) -> None:
    """copytree with hard links, but errors keep their errno (copytree folds them into one message)."""
    for folder, _, files in os.walk(source, onerror=_raise):
        into = target / Path(folder).relative_to(source)
        into.mkdir(exist_ok=True)
        for name in files:
            if is_regular(Path(folder) / name):  # a link is never followed (nor uploaded)
                os.link(Path(folder) / name, into / name)


def _raise(error: OSError) -> None:
    raise error


def release(staged: Path) -> None:
    """Drop a staged view once its upload is over (the original may live on, or may be gone)."""
    if staged.parent.name.startswith(STAGING_PREFIX):
        _remove(staged.parent)


def remove_leftovers(directory: Path) -> list[str]:
    """Staged views an agent that died mid-upload left behind; returns their names."""
    if not directory.is_dir():
        return []
    leftovers = sorted(p for p in directory.iterdir() if p.name.startswith(STAGING_PREFIX))
    for path in leftovers:
        _remove(path)
    return [path.name for path in leftovers]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


SET_VIEW = ".set"  # `.upload-<primary>/.set/`: the copies of a set of entries that go up as one checkpoint


class RewrittenWhileCopied(FileNotFoundError):
    """The version offered is gone: its file was rewritten (or began to be) while it was copied. A newer
    version supersedes it, as a checkpoint pruned before its turn is superseded."""


def copy_set(entries: list[Path], still_whole: Callable[[list[Path]], bool]) -> Path:
    """Private copies of `entries` (files or folders of one folder, the first named the set) under
    `.upload-<first>/.set/`, never sharing an inode with a file its writer truncates next; `still_whole`
    judges the copies again, and a copy it refuses raises RewrittenWhileCopied."""
    staging = entries[0].with_name(STAGING_PREFIX + entries[0].name)
    _remove(staging)
    view = staging / SET_VIEW
    view.mkdir(parents=True)
    try:
        for entry in entries:
            _copy_tree(entry, view / entry.name) if entry.is_dir() else shutil.copy2(entry, view / entry.name)
        if not still_whole([view / entry.name for entry in entries]):
            raise RewrittenWhileCopied(errno.ESTALE, "rewritten while it was copied", str(entries[0]))
    except BaseException:
        _remove(staging)
        raise
    return view


def _copy_tree(source: Path, target: Path) -> None:
    target.mkdir()
    for entry in sorted(source.iterdir()):
        if not entry.name.startswith(".") and is_regular(entry):
            shutil.copy2(entry, target / entry.name)


def set_named(view: Path) -> str | None:
    """The name of the set a staged view holds (its first entry's), or None when `view` is no set view."""
    if view.name == SET_VIEW and view.parent.name.startswith(STAGING_PREFIX):
        return view.parent.name.removeprefix(STAGING_PREFIX)
    return None
