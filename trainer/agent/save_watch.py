"""Says so, loudly, when a training command saves nothing the agent can recognise.

A script that writes its checkpoints under a name no layout knows would otherwise train for days
and lose everything at the first interruption. Once the command has run past the expected save
interval (or exits) with no recognised checkpoint, one warning names what CHECKPOINT_DIR holds
and the layouts the agent accepts; it goes to the log, status.json and `status`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..storage import layouts


def nothing_saved_warning(directory: Path, seconds: float) -> str:
    return (f"no recognised checkpoint after {seconds:.0f}s of training: {directory} holds "
            f"{layouts.describe(directory)}; the agent uploads {'; '.join(layouts.ACCEPTED)} "
            "(see README, Your own training command)")


@dataclass
class SaveWatch:
    directory: Path
    warn_after_seconds: float
    warn: Callable[[str], None]
    started: float = 0.0
    seen_checkpoint: bool = False
    warned: bool = False

    def start(self, *, resumed: bool) -> SaveWatch:
        """A new run of the command; a restored checkpoint counts as seen until the command saves."""
        self.started, self.seen_checkpoint = time.monotonic(), resumed
        return self

    def check(self, newest: object | None, *, exited: bool = False) -> None:
        """Called from the poll loop with the newest complete checkpoint (None when there is none)."""
        if newest is not None:
            self.seen_checkpoint = True
        if self.seen_checkpoint or self.warned:
            return
        elapsed = time.monotonic() - self.started
        if exited or elapsed >= self.warn_after_seconds:
            self.warned = True
            self.warn(nothing_saved_warning(self.directory, elapsed))
