"""Whether checkpoint uploads keep failing, and when the user must hear of it.

One failed upload is no news: the next step usually goes up. Two steps in a row, an upload made after
the command stopped (the emergency or final one: no later step will make up for it), a staging view
the disk cannot hold, or a file left out of a checkpoint are: the warning names its cause, and a cause
is announced once (one event, one notification), however many steps it fails.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..failure_causes import FailureCause
from ..s3.job_objects import RemoteStoreError

UPLOADS_FAILING = "checkpoint uploads are failing"  # how a failure's warning begins
LEFT_OUT = "files left out of checkpoints"  # how a left-out file's warning begins


@dataclass(frozen=True)
class UploadWarning:
    message: str  # '' once uploads work again
    cause: str
    step: int | None
    first_of_cause: bool  # announce it (event, notification); a repeat only keeps status.json's warning


def cause_of(error: BaseException) -> str:
    """A short, step-free name of what went wrong, the same for every step it fails."""
    if isinstance(error, RemoteStoreError) and error.cause:
        return error.cause
    origin = error if isinstance(error, OSError) else error.__cause__  # RemoteStoreError wraps the disk's
    if isinstance(origin, OSError) and (code := origin.errno) is not None and code in errno.errorcode:
        return f"{os.strerror(code).lower()} ({errno.errorcode[code]})"
    return type(error).__name__


@dataclass
class UploadHealth:
    warn: Callable[[UploadWarning], None]
    _failing: list[int] = field(default_factory=list)  # the last steps failed since the last success (3 kept)
    _said: set[str] = field(default_factory=set)
    _warned: bool = False  # a failure warning stands

    def failed(self, step: int, cause: str, *, urgent: bool) -> None:
        """`urgent`: the command has stopped, or the disk itself is the problem: warn at once."""
        if step not in self._failing:
            self._failing = [*self._failing, step][-3:]
        if urgent or len(self._failing) >= 2:
            newest = "" if len(self._failing) < 2 else f" (steps {', '.join(map(str, self._failing))})"
            self._warned = True
            self._say(f"{UPLOADS_FAILING}: {cause}{newest}; the newest checkpoint may be only on this "
                      "instance's disk", cause, step)

    def left_out(self, step: int, names: list[str]) -> None:
        """Files of `step` S3 cannot take were left out of it: the rest went up, but not whole."""
        self._say(f"{LEFT_OUT}: step {step} was stored without {', '.join(names[:3])} (S3 keys are at most "
                  "1024 bytes: shorten their paths)", FailureCause.LEFT_OUT, step)

    def succeeded(self, step: int) -> None:
        """Uploads work again: the failure warning is taken back (a left-out file's stays)."""
        self._failing.clear()
        if self._warned:
            self._warned = False
            self.warn(UploadWarning("", "", step, False))

    def _say(self, message: str, cause: str, step: int) -> None:
        first = cause not in self._said
        self._said.add(cause)
        self.warn(UploadWarning(message, cause, step, first))
