"""A checkpoint's files as the S3 store sees them: which files of a step-N entry go up (regular files
only), under which keys (names S3 cannot take are left out), and the names a manifest may give, so
a restore writes only inside the checkpoint folder."""

from __future__ import annotations

import os
from pathlib import Path

from ..failure_causes import FailureCause
from ..files.regular_files import is_regular
from ..s3.job_objects import RemoteStoreError
from ..s3.key_names import key_name, shown, too_long


class BadManifest(RemoteStoreError):
    """A manifest that names something no checkpoint of ours can be: proven damage, not a bad minute."""


def entry_name(name: object) -> str:
    """A checkpoint's name as its manifest gives it: one plain path component, never `.`, `..` or a
    path, so a restore writes and deletes only inside the checkpoint folder."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise BadManifest(f"manifest names the checkpoint {name!r}, not a plain name")
    return name


def safe_relative(name: str) -> str:
    """A file name inside a checkpoint: relative, with no `.`, `..` or empty part."""
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\0" in name:
        raise BadManifest(f"manifest names a file outside the checkpoint: {name!r}")
    return name


def checkpoint_files(local: Path) -> dict[str, Path]:
    """Relative POSIX name (as the file system gave it) → path of every regular file in a step-N
    checkpoint (a file or a directory). Links are never followed nor uploaded (links_in names them),
    nor are FIFOs, sockets or devices."""
    if local.is_symlink():
        raise RemoteStoreError(f"checkpoint {local} is a link: links are never uploaded",
                               cause=FailureCause.LINK)
    if local.is_file():
        return {local.name: local}
    if not local.is_dir():
        # A FIFO, a socket or a device is there for good; a name gone may be back as a newer checkpoint.
        raise RemoteStoreError(f"checkpoint {local} is neither a file nor a directory",
                               cause=FailureCause.NOT_REGULAR if os.path.lexists(local) else None)
    found: dict[str, Path] = {}
    for folder, _, names in os.walk(local):  # a link to a folder is listed, never entered
        for name in names:
            if is_regular(path := Path(folder) / name):
                found[path.relative_to(local).as_posix()] = path
    return dict(sorted(found.items()))


def stored_files(files: dict[str, Path], prefix: str) -> tuple[dict[str, tuple[str, Path]], list[str]]:
    """Key name → (name, path) of the files S3 can take under `prefix` (key_names.py's escape), and the
    names it cannot (a key over 1024 bytes), which are left out."""
    stored: dict[str, tuple[str, Path]] = {}
    left_out: list[str] = []
    for name, path in files.items():
        key = key_name(name)
        if too_long(prefix + key):
            left_out.append(name)
        else:
            stored[key] = (name, path)
    return stored, left_out


def names_shown(names: list[str]) -> str:
    """At most three names for one line, bytes that are not UTF-8 shown as \\xNN."""
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(shown(name) for name in names[:3]) + more


def file_version(path: Path) -> tuple[int, int]:
    """Size and modification time: a file rewritten in place changes one of them."""
    found = path.stat()
    return found.st_size, found.st_mtime_ns
