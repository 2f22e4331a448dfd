"""The local checkpoint store: `step-<N>` entries that are complete the moment they appear.

Layout inside the checkpoint directory:
    step-00000120/state.pt      the whole training state (torch.save of one dict)
    step-00000120/COMMITTED     JSON {"step", "files": {name: size}}, written last
    .tmp-step-120-<random>/     a write in progress; names starting with "." are ignored by everyone

A write goes to a temp directory, every file is fsynced, the marker is written last, the directory is
renamed to `step-N` and the parent is fsynced, so a crash at any instant leaves either the old or the
new checkpoint valid. Any `step-N` entry counts as committed for the agent (a user's own script may
write plain files by write-then-rename); the built-in loader also requires a valid marker.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

# Re-exported: the store and its callers speak of checkpoints by these names.
from .names import (  # noqa: F401
    MARKER_FILE,
    checkpoint_name,
    latest_checkpoint,
    list_checkpoints,
    parse_step,
    read_marker,
)

STATE_FILE = "state.pt"
TEMP_PREFIX = ".tmp-step-"
TRASH_PREFIX = ".trash-step-"

# Serializes a state dict into a file path; tests pass one that fails mid-write.
StateWriter = Callable[[dict[str, Any], Path], None]


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read; the message names the path and the cause."""


def committed_checkpoints(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """`step-N` directories with a valid commit marker, oldest first."""
    return [(step, path) for step, path in list_checkpoints(directory) if read_marker(path) is not None]


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The training state of one committed checkpoint, on the CPU, via the safe unpickler."""
    path = Path(path)
    if read_marker(path) is None:
        raise CheckpointError(f"{path} is not a committed checkpoint (missing or invalid {MARKER_FILE})")
    try:
        state: dict[str, Any] = torch.load(path / STATE_FILE, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for damaged archives
        raise CheckpointError(f"{path / STATE_FILE} cannot be read: {error}".splitlines()[0]) from None
    return state


def load_model_weights(checkpoint_path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The model's state dict stored in a checkpoint (for bit-identity comparisons)."""
    weights: dict[str, torch.Tensor] = load_checkpoint(checkpoint_path)["model"]
    return weights


def load_latest_valid(directory: str | os.PathLike[str],
                      above: int | None = None) -> tuple[Path, dict[str, Any]] | None:
    """Newest checkpoint that loads (above step `above`, when given); damaged ones are skipped with a
    one-line warning on stderr."""
    entries = list_checkpoints(directory)
    for step, path in reversed(entries):
        if above is not None and step <= above:
            break
        try:
            return path, load_checkpoint(path)
        except CheckpointError as error:
            print(f"warning: skipping checkpoint step {step}: {error}", file=sys.stderr, flush=True)
    return None


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def torch_writer(state: dict[str, Any], path: Path) -> None:
    torch.save(state, path)


def write_checkpoint(
    directory: str | os.PathLike[str], step: int, state: dict[str, Any], writer: StateWriter = torch_writer
) -> Path:
    """Write `state` as committed checkpoint `step-N` atomically and return its path."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    if read_marker(final) is not None:
        return final  # the same step is already committed (e.g. emergency save right after a periodic one)
    temp = root / f"{TEMP_PREFIX}{step}-{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    try:
        writer(state, temp / STATE_FILE)
        _fsync_path(temp / STATE_FILE)
        marker = {"step": step, "files": {STATE_FILE: (temp / STATE_FILE).stat().st_size}}
        (temp / MARKER_FILE).write_text(json.dumps(marker))
        _fsync_path(temp / MARKER_FILE)
        _fsync_path(temp)
        if final.exists():  # a damaged entry of the same step: move it aside, it holds nothing valid
            _discard(final)
        os.rename(temp, final)
        _fsync_path(root)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return final


def _discard(path: Path) -> None:
    """Rename out of sight first, so nobody ever sees a half-deleted `step-N`."""
    trash = path.with_name(f"{TRASH_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}")
    os.rename(path, trash)
    if trash.is_dir():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink(missing_ok=True)


def prune_checkpoints(directory: str | os.PathLike[str], keep: int) -> list[Path]:
    """Keep the newest `keep` committed checkpoints (never fewer than one); drop older entries.

    Entries newer than the newest committed one are left alone: they may be another writer's.
    A failed delete is reported and retried on the next prune rather than stopping training.
    """
    committed = committed_checkpoints(directory)
    if not committed:
        return []
    kept = {path for _, path in committed[-max(keep, 1):]}
    newest = committed[-1][0]
    removed = []
    for step, path in list_checkpoints(directory):
        if step <= newest and path not in kept:
            try:
                _discard(path)
                removed.append(path)
            except OSError as error:
                print(f"warning: could not delete {path}: {error}", file=sys.stderr, flush=True)
    return removed


def remove_stale_temps(directory: str | os.PathLike[str]) -> None:
    """Drop this store's own leftovers of writes or deletes cut short by a crash."""
    root = Path(directory)
    if not root.is_dir():
        return
    for entry in root.iterdir():
        if entry.name.startswith((TEMP_PREFIX, TRASH_PREFIX)):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)


class StagingBuffers:
    """CPU copies of a state's tensors in memory allocated once and reused by every save.

    `copy_` into warm buffers costs a memcpy; `clone()` pays page faults on fresh memory each time,
    which is what makes a naive snapshot stall the loop. Pinned memory (CUDA only) lets the
    device-to-host copies run without a bounce buffer.
    """

    def __init__(self, pin_memory: bool = False) -> None:
        self._pin = pin_memory
        self._buffers: dict[tuple[Any, ...], torch.Tensor] = {}

    def stage(self, state: Any) -> Any:
        staged = self._stage(state, ())
        if self._pin:
            torch.cuda.synchronize()  # the non-blocking device-to-host copies must land first
        return staged

    def _stage(self, value: Any, key: tuple[Any, ...]) -> Any:
        if isinstance(value, torch.Tensor):
            return self._buffer_for(value, key).copy_(value, non_blocking=self._pin)
        if isinstance(value, dict):
            return {name: self._stage(item, key + (name,)) for name, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._stage(item, key + (index,)) for index, item in enumerate(value))
        return value  # ints, floats, strings, None: immutable, shared as they are

    def _buffer_for(self, tensor: torch.Tensor, key: tuple[Any, ...]) -> torch.Tensor:
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            pin = self._pin and tensor.device.type == "cuda"
            buffer = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=pin)
            self._buffers[key] = buffer
        return buffer


# Called from the writer thread once a checkpoint is committed: (step, path, stall_s, write_s).
CommitCallback = Callable[[int, Path, float, float], None]


class AsyncCheckpointer:
    """Snapshot the state into reused buffers, then write, commit and prune in a background thread.

    At most one save is in flight: the next `save` first waits for the previous one, so the buffers
    are never overwritten while being written. A background failure is raised by the next `save`,
    `wait` or `close`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        keep: int = 3,
        on_commit: CommitCallback | None = None,
        writer: StateWriter = torch_writer,
        pin_memory: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self._on_commit = on_commit
        self._writer = writer
        self._buffers = StagingBuffers(pin_memory)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.last_committed: Path | None = None

    def save(self, step: int, state: dict[str, Any]) -> float:
        """Start saving `state` as step `step`; returns the seconds the caller was blocked."""
        started = time.perf_counter()
        self.wait()
        staged = self._buffers.stage(state)
        stall = time.perf_counter() - started
        self._thread = threading.Thread(
            target=self._write, args=(step, staged, stall), name=f"checkpoint-{step}", daemon=True
        )
        self._thread.start()
        return stall

    def save_now(self, step: int, state: dict[str, Any]) -> Path:
        """Save synchronously (emergency and final checkpoints) and return the committed path."""
        self.save(step, state)
        self.wait()
        assert self.last_committed is not None
        return self.last_committed

    def wait(self) -> None:
        """Block until the save in flight (if any) is committed; re-raise its failure."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise CheckpointError(f"checkpoint write in {self.directory} failed: {error}") from error

    close = wait

    def _write(self, step: int, staged: dict[str, Any], stall: float) -> None:
        started = time.perf_counter()
        try:
            path = write_checkpoint(self.directory, step, staged, self._writer)
            prune_checkpoints(self.directory, self.keep)
        except BaseException as error:  # surfaced to the training loop by wait()
            self._error = error
            return
        self.last_committed = path
        if self._on_commit is not None:
            self._on_commit(step, path, stall, time.perf_counter() - started)
