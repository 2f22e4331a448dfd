"""The training step a Lightning checkpoint holds, read from its archive without torch.

ModelCheckpoint puts the step in a file's name only with its default file name: `filename=
"{epoch}-{val_loss:.2f}"` or `"best"` carry none. Every Lightning checkpoint records it, though:
torch.save writes a zip whose `data.pkl` pickles the checkpoint dict, and Lightning puts "epoch" and
"global_step" first in it: those two, in that order, are the mark of a Lightning checkpoint. The
pickle's opcodes are read, never executed (nothing in the file runs), up to that key's value. A file
that is no such archive, or not yet whole, has no step.
"""

from __future__ import annotations

import pickletools
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import IO

from ..files.regular_files import open_regular

# Lightning's dump_checkpoint: {"epoch": E, "global_step": N, ...}, opened by these opcodes.
_PREAMBLE = frozenset({"PROTO", "FRAME", "EMPTY_DICT", "MARK"})
_LIGHTNING_START: tuple[object, ...] = ("epoch", int, "global_step", int)
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
        with open_regular(Path(path)) as raw, zipfile.ZipFile(raw) as archive:
            pickled = next((name for name in archive.namelist() if name.endswith("data.pkl")), None)
            if pickled is None:
                return None
            with archive.open(pickled) as stream:
                return _global_step(stream)
    except Exception:  # anything may lie in a file named .ckpt (cut short, encrypted, odd compression): no step
        return None


def _global_step(stream: IO[bytes]) -> int | None:
    """The value of `global_step` when the dict's first two entries are Lightning's: epoch, then global_step,
    each an integer (a `global_step` nested deeper, in hyperparameters or another format, is not it)."""
    items: list[tuple[str, object]] = []
    for count, (opcode, argument, _) in enumerate(pickletools.genops(stream)):
        if count >= _MAX_OPCODES:
            return None
        if opcode.name in _MEMO or (not items and opcode.name in _PREAMBLE):
            continue
        items.append((opcode.name, argument))
        if len(items) == len(_LIGHTNING_START):
            break
    shape = [(kind in _INTEGERS if expected is int else argument == expected)
             for (kind, argument), expected in zip(items, _LIGHTNING_START, strict=False)]
    if len(shape) < len(_LIGHTNING_START) or not all(shape):
        return None
    step = items[-1][1]
    return step if isinstance(step, int) else None
