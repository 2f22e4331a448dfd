"""The stop signal: its names, read once for both sides (the agent that sends SPOT_STOP_SIGNAL and the
callbacks in the command that wait for it; `SIGUSR1`, `USR1` and `10` name the same signal to both), and
the one way a process of the runtime takes signals over (`SignalConnector`): the agent (SIGTERM/SIGINT →
stop), the built-in trainer (end at once before training, a flag after) and the callbacks in a user's
script (the agent's stop signal → a flag). The connector is modelled on Lightning's: it registers a handler
that only calls a small action, chains a Python handler it found when asked to, restores what it found at
`teardown`, and off the main thread (where Python refuses handlers) changes nothing and says so by
returning False."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType

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

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None
Action = Callable[[signal.Signals], None]


class _Chained:
    """The handler registered: the action first, then the handler found before, when it is Python's own."""

    def __init__(self, action: Action, previous: Handler) -> None:
        self.action, self.previous = action, previous

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.action(signal.Signals(signum))
        if callable(self.previous):  # a handler the script had set keeps working
            self.previous(signum, frame)


class SignalConnector:
    def __init__(self) -> None:
        self._found: dict[signal.Signals, Handler] = {}  # what each signal had before the first change here
        self._registered: dict[signal.Signals, Handler] = {}  # what this connector set last

    def register(self, signums: Iterable[signal.Signals], action: Action, *, chain: bool = True) -> bool:
        """`action(signum)` on each signal from now on. `chain`: a Python handler set before keeps being
        called after it; without, this one alone decides. Asked again for a signal it already handles,
        it keeps the handler it set. False, changing nothing, off the main thread."""
        if not on_main_thread():
            return False
        for signum in signums:
            current = signal.getsignal(signum)
            if current is self._registered.get(signum) and isinstance(current, _Chained):
                continue
            self._set(signum, _Chained(action, current if chain else None))
        return True

    def end_at_once(self, signums: Iterable[signal.Signals]) -> bool:
        """The signals end the process at once, as with no handler at all (SIG_DFL). False off the main thread."""
        if not on_main_thread():
            return False
        for signum in signums:
            self._set(signum, signal.SIG_DFL)
        return True

    def teardown(self) -> bool:
        """Every signal changed here gets back the handler it had before. False off the main thread."""
        if not on_main_thread():
            return False
        for signum, handler in self._found.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self._found.clear()
        self._registered.clear()
        return True

    def _set(self, signum: signal.Signals, handler: Handler) -> None:
        self._found.setdefault(signum, signal.getsignal(signum))
        signal.signal(signum, handler)
        self._registered[signum] = handler


def on_main_thread() -> bool:
    """Python lets only the main thread set signal handlers."""
    return threading.current_thread() is threading.main_thread()
