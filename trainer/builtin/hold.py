"""Holding training at a step while a file exists (`--hold-at-step K --hold-while PATH`): a demo or a test
that must inject a fault while training is still running holds it there, instead of sizing the run
for a machine's pace and hoping. The hold sits at a step boundary, so a stop request (a notice, a
peer joining) is still saved at step K; it ends when the file goes, on a stop, or after HOLD_MOST_SECONDS.
"""

from __future__ import annotations

import time
from pathlib import Path

from .stop_flag import StopFlag

HOLD_MOST_SECONDS = 900.0  # a test that forgot its file must not hold a job for ever
POLL_SECONDS = 0.05


def hold_at(step: int, at_step: int | None, while_path: str | None, stop: StopFlag) -> None:
    """Wait at this step boundary while `while_path` exists, once `step` has reached `at_step`."""
    if at_step is None or not while_path or step < at_step:
        return
    gate, until = Path(while_path), time.monotonic() + HOLD_MOST_SECONDS
    while gate.exists() and stop.signal_name is None and time.monotonic() < until:
        time.sleep(POLL_SECONDS)
