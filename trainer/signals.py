"""The stop signal's names, read once for both sides: the agent that sends SPOT_STOP_SIGNAL and the
callbacks in the command that wait for it. `SIGUSR1`, `USR1` and `10` name the same signal to both."""

from __future__ import annotations

import signal

# The signals a command may be told to save and stop with (run.stop_signal); SIGKILL and SIGSTOP cannot
# be caught, so a command could never save on them.
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2")
UNCATCHABLE = frozenset({signal.SIGKILL, signal.SIGSTOP})
# The built-in trainer saves on these alone: any other stop signal would end it before it saves.
BUILTIN_STOP_SIGNALS = ("SIGTERM", "SIGINT")


def builtin_stop_problem(name: str) -> str:
    """Why the built-in trainer cannot stop on `name` and save ('' when it can)."""
    try:
        stop = parse_signal(name)
    except ValueError:
        return ""  # named as not a signal by the check that reads any command's stop signal
    if stop.name in BUILTIN_STOP_SIGNALS:
        return ""
    return (f"the built-in trainer saves on {' or '.join(BUILTIN_STOP_SIGNALS)} only, so {name} would end it "
            "before it saves: leave run.stop_signal out")


def parse_signal(name: str) -> signal.Signals:
    """`SIGTERM`, `TERM` or `15` → the signal; anything else raises ValueError naming it."""
    text = name.strip().upper()
    try:
        if text.isdigit():
            return signal.Signals(int(text))
        return signal.Signals[text if text.startswith("SIG") else "SIG" + text]
    except (KeyError, ValueError):
        raise ValueError(f"unknown signal {name!r}") from None
