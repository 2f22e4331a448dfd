"""The agent's stop signal, turned into a flag a training loop checks at its step boundary.

The agent sends SPOT_STOP_SIGNAL (SIGTERM by default) to the command's process group on a spot
notice, a rebalance recommendation or scale-in, then waits up to its grace period. A handler that
only sets a flag lets the step in flight finish: the checkpoint is taken between steps.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from ..signals import parse_signal

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def agent_stop_signal() -> signal.Signals:
    """The signal the agent stops commands with, read as the agent reads it; SIGTERM when unset or
    unknown to this platform (the agent refuses to start with such a value)."""
    try:
        return parse_signal(os.environ.get("SPOT_STOP_SIGNAL", "SIGTERM"))
    except ValueError:
        return signal.SIGTERM


@dataclass
class StopRequest:
    signum: signal.Signals
    received: bool = False
    _previous: Handler = None

    @classmethod
    def for_agent(cls) -> StopRequest:
        return cls(agent_stop_signal())

    def install(self, *, chain: bool = True) -> StopRequest:
        """Handle the signal from now on (main thread only, as Python requires); idempotent. `chain`: a
        handler set before keeps being called; without, this one alone decides."""
        current = signal.getsignal(self.signum)
        if current != self._handle:
            self._previous = current if chain else None
            signal.signal(self.signum, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        if callable(self._previous):  # a handler the script had set keeps working
            self._previous(signum, frame)

    @property
    def exit_code(self) -> int:
        """What a process ended by this signal reports (128 + N), so `train && export` stops too."""
        return 128 + int(self.signum)
