"""The training step a Lightning checkpoint holds, read from its archive without torch.

ModelCheckpoint puts the step in a file's name only with its default file name: `filename=
"{epoch}-{val_loss:.2f}"` or `"best"` carry none. Every Lightning checkpoint records it, though:
torch.save writes a zip whose `data.pkl` pickles the checkpoint dict, and Lightning puts "epoch" and
"global_step" first in it. The pickle's opcodes are read, never executed (nothing in the file runs),
up to that key's value. A file that is no such archive, or not yet whole, has no step.
"""

from __future__ import annotations

import pickletools
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import IO

_KEY = "global_step"
_INTEGERS = frozenset({"BININT", "BININT1", "BININT2", "LONG1", "LONG4"})
_MEMO = frozenset({"BINPUT", "LONG_BINPUT", "MEMOIZE", "PUT"})  # bookkeeping between a key and its value
_MAX_OPCODES = 64  # the key comes second; never read on into the names of a model's tensors


def archive_step(path: Path) -> int | None:
    """`global_step` of the Lightning checkpoint at `path`, or None (read once per version of the file)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _step_of_version(str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=512)
def _step_of_version(path: str, inode: int, mtime_ns: int, size: int) -> int | None:
    try:
        with zipfile.ZipFile(path) as archive:
            pickled = next((name for name in archive.namelist() if name.endswith("data.pkl")), None)
            if pickled is None:
                return None
            with archive.open(pickled) as stream:
                return _global_step(stream)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):  # not whole yet, or no archive of torch's
        return None


def _global_step(stream: IO[bytes]) -> int | None:
    after_key = False
    for count, (opcode, argument, _) in enumerate(pickletools.genops(stream)):
        if count >= _MAX_OPCODES:
            return None
        if opcode.name in _MEMO:
            continue
        if after_key:
            return argument if opcode.name in _INTEGERS and isinstance(argument, int) else None
        after_key = argument == _KEY
    return None
