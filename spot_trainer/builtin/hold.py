"""Holding training at a step while a file exists (`--hold-at-step K --hold-while PATH`): a demo or a test
that must inject a fault while training is still running holds it there, instead of sizing the run
for a machine's pace and hoping. The hold sits at a step boundary and is decided by the whole world
(every rank is at the same step): it ends for all once the file goes, once any rank is asked to stop
(so the stop is saved at that step, together), or after HOLD_MOST_SECONDS in all for this process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .group import Group
from .stop_flag import StopFlag

HOLD_MOST_SECONDS = 900.0  # a demo or test that forgot its file must not hold a job for ever
POLL_SECONDS = 0.05


@dataclass
class Hold:
    at_step: int | None
    gate: Path | None
    until: float | None = None  # set when the first hold begins: one bound for the whole process

    def wait(self, step: int, stop: StopFlag, group: Group) -> None:
        """Wait at this step boundary, once `step` has reached `at_step`, while the gate file exists."""
        if self.at_step is None or self.gate is None or step < self.at_step:
            return
        self.until = self.until or time.monotonic() + HOLD_MOST_SECONDS
        while not group.any(self._released(stop)):
            time.sleep(POLL_SECONDS)

    def _released(self, stop: StopFlag) -> bool:
        assert self.gate is not None and self.until is not None
        return stop.signal_name is not None or not self.gate.exists() or time.monotonic() >= self.until
