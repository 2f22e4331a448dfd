"""Checkpoints recognised by their shape: a series of names that differ only in one integer, which
rises as they appear (`model_<epoch>.pth`, `epoch_<N>/`, Keras' `weights.<epoch>-<val_loss>.hdf5`).

A name's shape is the name with one of its integers taken out and every decimal number (a loss, a
metric) masked. Entries of one folder with the same shape form a series when there are at least two,
each written after the one numbered below it, and at least SERIES_GAP_SECONDS after it: a training
loop saves between epochs, while numbered files written all at once (`shard_0003.bin`,
`part-00001.parquet` from one export) come out within a moment of each other and are not taken for
checkpoints. Only what holds weights takes part: folders and files with the suffixes checkpoints are saved under
(`.json` metrics or `.parquet` exports never do), and no `-00001-of-00003` shard of one save (HF's
sharded `model-00001-of-00003.safetensors` are one model, written one after another). A folder is
scanned once per change of its own modification time.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

SERIES_GAP_SECONDS = 1.0  # the least time between two saves of a training loop; exports write faster
# File times come from the kernel's coarse clock (a tick is 1-10 ms): saves a second apart may read 0.996 s.
_MTIME_TICK = 0.01
_DECIMAL = re.compile(r"\d+\.\d+(?:[eE][-+]?\d+)?")
_INTEGER = re.compile(r"\d+")
_MASKED = "\0"  # stands for a decimal number in a shape; never in a file name
WEIGHT_SUFFIXES = frozenset({".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".h5", ".hdf5", ".keras", ".pkl",
                             ".pickle", ".npz", ".joblib", ".msgpack", ".tar"})
_SHARD_OF = re.compile(r"\d+-of-\d+")


@dataclass(frozen=True)
class Member:
    name: str
    number: int
    written: float  # modification time


def shapes(name: str) -> list[tuple[str, int]]:
    """(shape, number) for each integer of `name` outside its decimal numbers."""
    masked = _DECIMAL.sub(_MASKED, name)
    return [(masked[:m.start()] + "{}" + masked[m.end():], int(m.group())) for m in _INTEGER.finditer(masked)]


def series_numbers(entries: list[tuple[str, float]]) -> dict[str, int]:
    """name → its number in a series, for the (name, modification time) entries of one folder."""
    by_shape: dict[str, list[Member]] = {}
    for name, written in entries:
        for shape, number in shapes(name):
            by_shape.setdefault(shape, []).append(Member(name, number, written))
    found: dict[str, int] = {}
    for members in by_shape.values():
        if _a_series(members):
            found.update((member.name, member.number) for member in members if member.name not in found)
    return found


def _a_series(members: list[Member]) -> bool:
    if len(members) < 2 or len({member.number for member in members}) < len(members):
        return False
    in_order = sorted(members, key=lambda member: member.number)
    return all(later.written - earlier.written >= SERIES_GAP_SECONDS - _MTIME_TICK
               for earlier, later in zip(in_order, in_order[1:], strict=False))


_CACHE: dict[str, tuple[int, dict[str, int]]] = {}
CACHED_FOLDERS = 64


def number_in_series(path: Path) -> int | None:
    """The number of `path` in a series of its folder, or None."""
    folder = str(path.parent)
    try:
        version = os.stat(folder).st_mtime_ns
    except OSError:
        return None
    cached = _CACHE.get(folder)
    if cached is None or cached[0] != version:
        if len(_CACHE) >= CACHED_FOLDERS:  # final outputs walk every folder below CHECKPOINT_DIR
            _CACHE.clear()
        cached = (version, series_numbers(_listing(path.parent)))
        _CACHE[folder] = cached
    return cached[1].get(path.name)


def _may_hold_weights(entry: os.DirEntry[str]) -> bool:
    if entry.name.startswith(".") or _SHARD_OF.search(entry.name):
        return False
    return entry.is_dir(follow_symlinks=False) or Path(entry.name).suffix.lower() in WEIGHT_SUFFIXES


def _listing(folder: Path) -> list[tuple[str, float]]:
    entries = []
    try:
        with os.scandir(folder) as found:
            for entry in found:
                if _may_hold_weights(entry):
                    try:
                        entries.append((entry.name, entry.stat(follow_symlinks=False).st_mtime))
                    except OSError:  # removed while we looked
                        continue
    except OSError:
        return []
    return entries
