"""An environment as one archive: the venv and the runtime, packed from the app folder, and unpacked into
a staging folder beside it that is moved into place only once its bytes and its contents have passed."""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

PARTS = ("venv", "lib")  # the job's Python and the runtime installed beside it
STAGING = ".environment-restore"


def pack(app_dir: Path, archive: Path) -> int:
    """Bytes of the archive written; symlinks stay links (a venv's python points at its base). Level 1:
    torch's venv (761 MB) packs in 8 s to 236 MB, against 20 s to 206 MB at 6; both unpack in 5 s."""
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        for part in PARTS:
            tar.add(app_dir / part, arcname=part)
    return archive.stat().st_size


def outside_parts(name: str) -> str | None:
    """Why a member (or a hard link's target) named so may not be unpacked, or None."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] not in PARTS:
        return f"the archive holds {name}, outside {' and '.join(PARTS)}"
    return None


def link_leading_out(staging: Path) -> str | None:
    """Why a link of the unpacked environment may not be kept, or None. Every link must lead, as the file
    system resolves it (through the other links, so no chain of `..` gets around this), to a place inside
    venv/ or lib/, or to the file venv/bin/python3 leads to: the venv's base interpreter. Neither tool
    writes through a link while it unpacks (extract.py); this keeps a link out of the environment that the
    job would later read or write through."""
    inside = [Path(os.path.realpath(staging)) / part for part in PARTS]  # venv/ itself a link leads out
    interpreter = Path(os.path.realpath(staging / "venv" / "bin" / "python3"))
    base = interpreter if interpreter.is_file() else None
    for folder, folders, files in os.walk(staging):  # a link to a folder is listed, never entered
        for name in (*folders, *files):
            path = Path(folder) / name
            if not path.is_symlink():
                continue
            resolved = Path(os.path.realpath(path))
            if resolved != base and not any(resolved.is_relative_to(part) for part in inside):
                return f"the archive holds {path.relative_to(staging).as_posix()}, a link to " \
                       f"{os.readlink(path)}, which leads out of {' and '.join(PARTS)}"
    return None


@contextmanager
def staging_beside(app_dir: Path) -> Iterator[Path]:
    """An empty folder in the app folder (the same file system, so the move into place is a rename),
    gone on leaving whatever happened."""
    staging = app_dir / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def put_in_place(staging: Path, app_dir: Path) -> None:
    """The unpacked venv and runtime replace the app folder's; ValueError when they are not an environment."""
    for entry in sorted(staging.iterdir()):
        reason = outside_parts(entry.name)
        if reason:
            raise ValueError(reason)
    if reason := link_leading_out(staging):
        raise ValueError(reason)
    for needed in (*PARTS, "venv/bin/python3"):
        if not (staging / needed).is_symlink() and not (staging / needed).exists():
            raise ValueError(f"the archive holds no {needed}")
    for part in PARTS:
        shutil.rmtree(app_dir / part, ignore_errors=True)
        (staging / part).rename(app_dir / part)
