"""Uploads the newest local checkpoint in the background, one at a time, skipping intermediates.

The agent's poll loop only offers checkpoints; it never waits on S3. If training writes checkpoints
faster than they can be uploaded, the ones that appear during an upload are superseded by the
newest, so S3 is at most one upload behind and no bandwidth goes to steps nobody will restore.
Each upload reads a hard-linked view of its checkpoint (staging.py), so a trainer pruning the
original meanwhile cannot break it. Where that view cannot be made (a full disk, no inodes left, a
read-only file system), the step fails while the command still runs; once the command has stopped
nothing can rewrite the checkpoint any more, so it is uploaded from its own files.

A checkpoint keeps its type from the agent's offer to S3: the sender (step_sender.py) decides where it goes
and publishes it; only the outcome is reported back.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ..failure_causes import NEVER_SENT
from ..files.regular_files import links_in
from ..files.staging import RewrittenWhileCopied, copy_set, release, stage
from ..s3.job_objects import RemoteStoreError
from ..saves import fixed_names, layouts
from ..saves.layouts import Checkpoint
from ..upload_outcome import UploadOutcome
from .upload_health import UploadHealth, UploadWarning, cause_of


class Sender(Protocol):
    def send(self, checkpoint: Checkpoint) -> UploadOutcome:
        """One checkpoint to S3, published once its step is whole (StepSender). `checkpoint.path` is the
        private view the uploader staged, not the folder the command writes."""


@dataclass(frozen=True)
class Uploaded:
    step: int
    seconds: float
    bytes: int
    published: bool  # False when latest.json already held a newer step or the lease was lost
    part: bool = False  # this node's part of a sharded step went up; the step counts once every part has


@dataclass(frozen=True)
class Offered:
    checkpoint: Checkpoint
    writer_done: bool  # the command has stopped: with no staging view, its own files may go up


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class CheckpointUploader:
    """`offer` is cheap and non-blocking; `drain` waits until everything offered is settled."""

    def __init__(
        self,
        sender: Sender,
        on_uploaded: Callable[[Uploaded], None],
        *,
        uploaded_step: int | None = None,
        log: Callable[[str], None] = lambda line: print(f"spot-trainer: {line}", file=sys.stderr, flush=True),
        warn: Callable[[UploadWarning], None] = lambda warning: None,
    ) -> None:
        self._sender, self._on_uploaded, self._log = sender, on_uploaded, log
        self.health = UploadHealth(warn)
        self.uploaded_step = uploaded_step  # newest step known to be safe in S3
        self._offered_step = uploaded_step
        self._pending: Offered | None = None
        self._failed_step: int | None = None  # the last upload that raised, which `retry` may offer again
        self._refused: dict[int, tuple[str, str]] = {}  # step → why no retry can send it, and its cause
        self._links_missing_logged = False
        self._busy = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="checkpoint-upload", daemon=True)
        self._thread.start()

    def offer(self, checkpoint: Checkpoint, *, retry: bool = False, writer_done: bool = False) -> bool:
        """Queue `checkpoint` unless an equal or newer step was already offered; True if queued.
        With `retry`, a step whose upload failed may be offered once more. `writer_done`: the command
        has stopped, so the checkpoint may be uploaded from its own files if no staging view can be made."""
        step = checkpoint.step
        with self._cond:
            if writer_done and self._pending is not None and self._pending.checkpoint.step == step:
                self._pending = replace(self._pending, writer_done=True)  # still waiting: it goes as the last one
            again = retry and step == self._failed_step and self._pending is None
            if not again and self._offered_step is not None and step <= self._offered_step:
                return False
            self._failed_step = None if again else self._failed_step
            self._offered_step = max(step, self._offered_step or step)
            self._pending = Offered(checkpoint, writer_done)
            self._cond.notify_all()
            return True

    def refusal(self, step: int) -> tuple[str, str] | None:
        """Why S3 refused `step` so that no retry can send it, and its cause; None when a retry may."""
        with self._cond:
            return self._refused.get(step)

    @property
    def offered_step(self) -> int | None:
        """The newest step offered so far: nothing at or below it is offered again."""
        with self._cond:
            return self._offered_step

    def already_in_s3(self, step: int) -> None:
        """`step` came from S3 (another node wrote it): nothing at or below it needs uploading."""
        with self._cond:
            self.uploaded_step = max(step, self.uploaded_step or step)
            self._offered_step = max(step, self._offered_step or step)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for the queued and in-flight uploads; False if `timeout` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending is not None or self._busy:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    return
                offered, self._pending = self._pending, None
                self._busy = True
            try:
                self._upload_one(offered)
            except Exception as error:  # never let the worker die: drain() would wait on it for good
                step = offered.checkpoint.step
                self._log(f"upload of checkpoint step {step} failed: {_one_line(error)}")
                self.health.failed(step, cause_of(error), urgent=offered.writer_done)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _upload_one(self, offered: Offered) -> None:
        checkpoint, writer_done = offered.checkpoint, offered.writer_done
        step, path = checkpoint.step, checkpoint.path
        started = time.monotonic()
        staged: Path | None = None
        if links := links_in(path):
            self._log(f"checkpoint step {step}: not uploading {', '.join(links[:5])}: links are never followed "
                      "or uploaded (save real files into CHECKPOINT_DIR)")
        if path.is_symlink():  # the checkpoint itself: whatever it points at is not the job's
            self._mark_failed(step)
            return
        try:
            staged = self._stage(path, step, writer_done)
        except RewrittenWhileCopied:  # a newer version is being written: it goes up once whole
            self._log(f"checkpoint step {step}: {path.name} was rewritten while it was copied for upload; "
                      "the next whole version goes up")
            self._mark_failed(step)
            return
        except FileNotFoundError:  # pruned before its turn came: a newer checkpoint supersedes it
            return
        except OSError as error:  # a full disk, no inodes, read-only: this step fails, the worker lives on
            self._log(f"upload of checkpoint step {step} failed: staging {path.name}: {_one_line(error)}; "
                      "the next checkpoint is tried (and this one from its own files once the command stops)")
            self._mark_failed(step)
            self.health.failed(step, f"staging in {path.parent}: {cause_of(error)}", urgent=True)
            return
        try:
            size = size_of(staged)
            outcome = self._sender.send(replace(checkpoint, path=staged))
        except Exception as error:  # S3 down after retries, a file that changed: the next may succeed
            self._log(f"upload of checkpoint step {step} failed: {_one_line(error)}")
            self._mark_failed(step)
            self._note_refusal(step, error)
            self.health.failed(step, cause_of(error), urgent=writer_done)
            return
        finally:
            if staged is not None and staged != path:
                release(staged)
        published = outcome is UploadOutcome.PUBLISHED
        if published:
            self.uploaded_step = max(step, self.uploaded_step or 0)
        self.health.succeeded(step)
        try:
            part = outcome is UploadOutcome.PART_SENT
            self._on_uploaded(Uploaded(step, time.monotonic() - started, size, published, part=part))
        except Exception as error:  # reporting is secondary; the worker must live on
            self._log(f"recording the upload of step {step} failed: {_one_line(error)}")

    def _note_refusal(self, step: int, error: Exception) -> None:
        if isinstance(error, RemoteStoreError) and error.cause in NEVER_SENT:
            with self._cond:
                self._refused[step] = (_one_line(error), error.cause)

    def _mark_failed(self, step: int) -> None:
        """`step` did not go up: `offer(..., retry=True)` may offer it once more."""
        with self._cond:
            self._failed_step = step

    def _stage(self, path: Path, step: int, writer_done: bool) -> Path:
        """A staging view of `path`, or once its writer has stopped and none can be made, `path` itself. A
        fixed-name checkpoint, which its script rewrites in place, is copied with the entries beside it."""
        if (entries := layouts.fixed_entries(path)) is not None:
            return copy_set(entries, lambda copies: fixed_names.copies_whole(copies, step))
        try:
            staged = stage(path)
        except FileNotFoundError:
            raise
        except OSError as error:
            if not writer_done:
                raise
            self._log(f"checkpoint step {step}: no staging view ({_one_line(error)}); the command has stopped, "
                      f"so {path.name} is uploaded from its own files")
            return path
        if staged is None and not self._links_missing_logged:
            self._links_missing_logged = True
            self._log(f"no hard links in {path.parent}: uploading checkpoints in place, so "
                      "pruning them while an upload runs would fail it")
        return staged or path


def _one_line(error: Any) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
