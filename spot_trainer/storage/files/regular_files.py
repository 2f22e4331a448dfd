"""Opening a file of the checkpoint folder only when it is a regular file of its own.

The folder is the user's: a name the layouts read (`trainer_state.json`, `last.ckpt`, a marker) may be
a FIFO, whose open would block the agent's poll loop for good, or a link to anything on the machine.
Such entries are never read, uploaded or followed: opened without following links and without
blocking, then checked to be a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO


class NotARegularFile(OSError):
    """A link, FIFO, socket or device where a file was expected."""


def is_regular(path: Path) -> bool:
    """A regular file, not a link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def open_regular(path: Path) -> IO[bytes]:
    """`open(path, "rb")`, refusing links and anything but a regular file (NotARegularFile), never
    waiting on a FIFO's writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotARegularFile(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def read_regular_text(path: Path) -> str:
    with open_regular(path) as stream:
        return stream.read().decode()


def links_in(local: Path) -> list[str]:
    """The links inside a checkpoint (or the checkpoint itself, if it is one), which are not uploaded."""
    if local.is_symlink():
        return [local.name]
    if not local.is_dir():
        return []
    return sorted(path.relative_to(local).as_posix() for folder, dirs, names in os.walk(local)
                  for path in (Path(folder) / n for n in (*dirs, *names)) if path.is_symlink())

