"""The stop signal's names, read once for both sides: the agent that sends SPOT_STOP_SIGNAL and the
callbacks in the command that wait for it. `SIGUSR1`, `USR1` and `10` name the same signal to both."""

from __future__ import annotations

import signal

# The signals a command may be told to save and stop with (run.stop_signal); SIGKILL and SIGSTOP cannot
# be caught, so a command could never save on them.
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2")
UNCATCHABLE = frozenset({signal.SIGKILL, signal.SIGSTOP})


def parse_signal(name: str) -> signal.Signals:
    """`SIGTERM`, `TERM` or `15` → the signal; anything else raises ValueError naming it."""
    text = name.strip().upper()
    try:
        if text.isdigit():
            return signal.Signals(int(text))
        return signal.Signals[text if text.startswith("SIG") else "SIG" + text]
    except (KeyError, ValueError):
        raise ValueError(f"unknown signal {name!r}") from None
