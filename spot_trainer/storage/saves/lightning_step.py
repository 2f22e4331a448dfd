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
from pathlib import Path
from typing import IO

from ..files.regular_files import open_regular
from .stated_step import read_once_per_version

# Lightning's dump_checkpoint: {"epoch": E, "global_step": N, ...}, opened by these opcodes.
_PREAMBLE = frozenset({"PROTO", "FRAME", "EMPTY_DICT", "MARK"})
_LIGHTNING_START: tuple[object, ...] = ("epoch", int, "global_step", int)
_INTEGERS = frozenset({"BININT", "BININT1", "BININT2", "LONG1", "LONG4"})
_MEMO = frozenset({"BINPUT", "LONG_BINPUT", "MEMOIZE", "PUT"})  # bookkeeping between a key and its value
_MAX_OPCODES = 64  # the key comes second; never read on into the names of a model's tensors


def _read_archive_step(path: Path) -> int | None:
    with open_regular(path) as raw, zipfile.ZipFile(raw) as archive:
        pickled = next((name for name in archive.namelist() if name.endswith("data.pkl")), None)
        if pickled is None:
            return None
        with archive.open(pickled) as stream:
            return _global_step(stream)


# `global_step` of the Lightning checkpoint at a path, or None (read once per version of the file).
archive_step = read_once_per_version(_read_archive_step)


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
