"""The progress lines a training program prints: one JSON object per line on stdout.

`{"event": "step", "step": N, ...}`, `checkpoint`, `emergency_checkpoint`, `resumed`, `started` and
`done`. The built-in trainer and the framework callbacks print them; the agent turns `step` lines
into status and metrics, and the local spot cloud's report reads all of them. Any command may print
them too. Nothing here imports torch.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

_print_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """One flushed JSON line on stdout; safe from a checkpoint writer thread."""
    line = json.dumps({"event": event, **fields})
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


@dataclass
class StepLines:
    """`step` lines at most every `interval` seconds: a framework may run a thousand tiny steps a
    second, and each line travels to the agent, the journal and CloudWatch Logs. Saves, resumes and
    emergency checkpoints are always printed with their exact step."""

    interval: float = 0.2
    _last: float = field(default=float("-inf"))

    def step(self, step: int, **fields: Any) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            emit("step", step=step, **fields)
