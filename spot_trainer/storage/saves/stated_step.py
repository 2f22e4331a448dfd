"""The step a checkpoint file states about itself, read from its format without running anything in it.

A script that keeps one checkpoint under a fixed name (`ckpt.pt`, `checkpoint.pth.tar`, `last.pt`) puts
the step inside it, as a top-level entry of the dict it saves. Where the format states it:

    torch archive   torch.save writes a zip whose `data.pkl` pickles the saved object. Its opcodes are
                    played on a stack of stand-ins, never executed (no class is looked up, nothing in the
                    file runs), to the saved dict's own entries: the first of STEP_KEYS among them whose
                    value is a whole number. A key nested deeper (in `config`, in `args`) is not it.
    safetensors     the header's `__metadata__` (string to string): the first of STEP_KEYS that is a
                    whole number in decimal.
    JSON            a small state file beside the weights (`state.json`): a top-level entry as above.

Anything else (a legacy pickle, Keras's archive, HDF5) states no step here: None.
"""

from __future__ import annotations

import json
import pickletools
import zipfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from ..files import whole_files
from ..files.regular_files import open_regular

# The names scripts give the step, most specific first: a dict with both `global_step` and `epoch` is at
# the former (Lightning, HF), one with `epoch` alone at its epoch (the ImageNet example, YOLO).
STEP_KEYS = ("global_step", "step", "iter_num", "iteration", "iter", "epoch")
_MAX_PICKLE_BYTES = 64 * 2**20  # a state dict's pickle names its tensors; its bytes lie in other members
_MAX_JSON_BYTES = 2**20
_STRINGS = frozenset({"BINUNICODE", "SHORT_BINUNICODE", "UNICODE", "BINUNICODE8", "SHORT_BINSTRING",
                      "BINSTRING", "STRING"})
_NUMBERS = frozenset({"BININT", "BININT1", "BININT2", "LONG1", "LONG4", "INT", "LONG", "BINFLOAT", "FLOAT"})
_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})


class _Mark:
    """Where a MARK opcode left the stack."""


class _Object:
    """A stand-in for whatever an opcode built; a dict's entries are kept (an OrderedDict, a REDUCE, gets
    its SETITEMS as a dict does)."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, Any]] = []


def read_once_per_version(read: Callable[[Path], int | None]) -> Callable[[Path], int | None]:
    """`read` of a file's step, asked again only when the file changed (its inode, time or size): the agent
    polls the checkpoint folder every second. Whatever the file holds, a read that fails states no step."""
    @lru_cache(maxsize=512)
    def of_version(path: str, inode: int, mtime_ns: int, size: int) -> int | None:
        try:
            return read(Path(path))
        except Exception:  # anything may lie in a user's file (cut short, odd compression): it states no step
            return None

    def step(path: Path) -> int | None:
        try:
            found = path.stat()
        except OSError:
            return None
        return of_version(str(path), found.st_ino, found.st_mtime_ns, found.st_size)

    return step


def _read_step(path: Path) -> int | None:
    """The step the file at `path` states, or None."""
    if path.suffix == ".json":
        with open_regular(path) as stream:
            return step_of_entries(_json_entries(stream.read(_MAX_JSON_BYTES + 1)))
    found = whole_files.format_of(path)
    if found is whole_files.Format.ZIP:
        return _archive_step(path)
    if found is whole_files.Format.SAFETENSORS:
        return _safetensors_step(path)
    return None


step_in = read_once_per_version(_read_step)


def _json_entries(raw: bytes) -> list[tuple[Any, Any]]:
    if len(raw) > _MAX_JSON_BYTES:
        return []
    state = json.loads(raw)
    return list(state.items()) if isinstance(state, dict) else []


def _archive_step(path: Path) -> int | None:
    with open_regular(path) as raw, zipfile.ZipFile(raw) as archive:
        pickled = next((info for info in archive.infolist() if info.filename.endswith("data.pkl")), None)
        if pickled is None or pickled.file_size > _MAX_PICKLE_BYTES:
            return None
        with archive.open(pickled) as stream:
            return step_of_entries(top_level_entries(stream))


def _safetensors_step(path: Path) -> int | None:
    with open_regular(path) as stream:
        length = int.from_bytes(stream.read(8), "little")
        header = json.loads(stream.read(length))
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(metadata, dict):
        return None
    decimal = [(key, int(value)) for key, value in metadata.items() if isinstance(value, str) and value.isdigit()]
    return step_of_entries(decimal)


def step_of_entries(entries: list[tuple[Any, Any]]) -> int | None:
    """The first of STEP_KEYS among (key, value) entries whose value is a whole number (never a bool)."""
    values = {key: value for key, value in entries if isinstance(key, str)}
    for key in STEP_KEYS:
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def top_level_entries(stream: IO[bytes]) -> list[tuple[Any, Any]]:
    """The (key, value) entries of the object a pickle builds, as far as stand-ins show them: strings and
    numbers as themselves, everything else a stand-in. Empty when the object is no dict."""
    stack: list[Any] = []
    memo: dict[int, Any] = {}
    for opcode, argument, _ in pickletools.genops(stream):
        name = opcode.name
        if name == "STOP":
            top = stack.pop() if stack else None
            return top.items if isinstance(top, _Object) else []
        if name in _STRINGS or name in _NUMBERS:
            stack.append(argument.decode("latin-1") if isinstance(argument, bytes) else argument)
        elif name in ("NEWTRUE", "NEWFALSE"):
            stack.append(name == "NEWTRUE")
        elif name == "MARK":
            stack.append(_Mark())
        elif name in _PUTS:
            memo[int(argument or 0)] = stack[-1]
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif name in _GETS:
            stack.append(memo[int(argument or 0)])
        elif name == "SETITEM":
            value, key = stack.pop(), stack.pop()
            _add_items(stack[-1], [(key, value)])
        elif name == "SETITEMS":
            flat = _pop_to_mark(stack)
            _add_items(stack[-1], list(zip(flat[::2], flat[1::2], strict=False)))
        elif name == "DICT":
            built = _Object()
            flat = _pop_to_mark(stack)
            built.items = list(zip(flat[::2], flat[1::2], strict=False))
            stack.append(built)
        elif name == "DUP":
            stack.append(stack[-1])
        elif name == "BUILD":  # an object's state set on it (a state_dict's `_metadata`): it stays itself
            stack.pop()
        else:
            _play(opcode, stack)
    return []


def _play(opcode: pickletools.OpcodeInfo, stack: list[Any]) -> None:
    """Any other opcode by its declared effect: what it takes off the stack, and a stand-in per result."""
    before = opcode.stack_before
    if pickletools.markobject in before:
        _pop_to_mark(stack)
        before = before[:before.index(pickletools.markobject)]
    for _ in before:
        stack.pop()
    stack.extend(_Object() for _ in opcode.stack_after)


def _pop_to_mark(stack: list[Any]) -> list[Any]:
    for at in range(len(stack) - 1, -1, -1):
        if isinstance(stack[at], _Mark):
            taken = stack[at + 1:]
            del stack[at:]
            return taken
    raise ValueError("no MARK on the stack")


def _add_items(target: Any, items: list[tuple[Any, Any]]) -> None:
    if isinstance(target, _Object):
        target.items.extend(items)
