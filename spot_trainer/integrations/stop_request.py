"""The agent's stop signal, turned into a flag a training loop checks at its step boundary.

The agent sends SPOT_STOP_SIGNAL (SIGTERM by default) to the command's process group on a spot
notice, a rebalance recommendation or scale-in, then waits up to its grace period. A handler that
only sets a flag lets the step in flight finish: the checkpoint is taken between steps.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field

from ..signals import SignalConnector, parse_signal


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
    signals: SignalConnector = field(default_factory=SignalConnector)

    @classmethod
    def for_agent(cls) -> StopRequest:
        return cls(agent_stop_signal())

    def install(self, *, chain: bool = True) -> StopRequest:
        """Handle the signal from now on (main thread only, as Python requires; elsewhere nothing changes);
        idempotent. `chain`: a handler set before keeps being called; without, this one alone decides."""
        self.signals.register((self.signum,), self._record, chain=chain)
        return self

    def _record(self, signum: signal.Signals) -> None:
        self.received = True

    @property
    def exit_code(self) -> int:
        """What a process ended by this signal reports (128 + N), so `train && export` stops too."""
        return 128 + int(self.signum)
