"""A real, small file system for the tests of a full disk: a tmpfs with few inodes, mounted for one test."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest


@contextmanager
def tiny_tmpfs(where: Path, *, inodes: int, size: str = "8m",
               refused: Callable[[str], NoReturn] = pytest.skip) -> Iterator[Path]:
    """`where` as a tmpfs of `inodes` inodes (its root takes one), unmounted afterwards. Where mounting
    is not allowed, `refused` is told why (a test is skipped)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},nr_inodes={inodes},mode=0755", "tmpfs",
                              str(where)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        refused(f"cannot mount a tmpfs at {where} ({mounted.stderr.strip()}): the full-disk cases need root")
    try:
        yield where
    finally:
        # Lazily: a process the test started may still hold the folder for a moment after the test.
        subprocess.run(["umount", "--lazy", str(where)], capture_output=True, check=False)


def fill_inodes(folder: Path, *, at_most: int = 10_000) -> list[Path]:
    """Empty files until the file system has no inode left; the files made."""
    made: list[Path] = []
    for index in range(at_most):
        try:
            (path := folder / f"fill-{index}").touch()
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
            return made
        made.append(path)
    raise AssertionError(f"{folder} still had inodes after {at_most} files: not a tiny file system")


def remount_read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True, check=True)
