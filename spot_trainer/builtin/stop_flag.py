"""How the built-in trainer takes SIGTERM/SIGINT: at once before training, at a step boundary after."""

from __future__ import annotations

import signal

from ..signals import BUILTIN_STOP_SIGNALS, SignalConnector

STOP_SIGNALS = tuple(signal.Signals[name] for name in BUILTIN_STOP_SIGNALS)


class StopFlag:
    """Until training begins SIGTERM/SIGINT end the process at once (`end_at_once`); from then on they
    only record the request, and the loop acts on it at the next step boundary (`install`).

    Why not record from the start: before the first step the state is the checkpoint it resumes from,
    so there is nothing to save, and setup may be blocked inside a collective (init_process_group, DDP's
    first broadcast, agreeing on the checkpoint) with a peer that is gone. A Python handler runs only
    once that returns, after the collective timeout, and the world waits for this rank all the while."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.signals = SignalConnector()

    def end_at_once(self) -> None:
        self.signals.end_at_once(STOP_SIGNALS)

    def install(self) -> None:
        self.signals.register(STOP_SIGNALS, self._record, chain=False)

    def _record(self, signum: signal.Signals) -> None:
        self.signal_name = signum.name
