"""The one signal connector of the runtime: a stop signal reaches its action, a script's own handler
keeps working when chained, what was there comes back at teardown, and off the main thread nothing
changes (Python allows handlers only there)."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

from spot_trainer.builtin.stop_flag import StopFlag
from spot_trainer.signals import SignalConnector

SIG = signal.SIGUSR1


def test_the_action_runs_then_the_handler_it_found_and_teardown_gives_that_handler_back() -> None:
    heard: list[str] = []

    def scripts_own(signum: int, frame: FrameType | None) -> None:
        heard.append("script")

    before = signal.signal(SIG, scripts_own)
    connector = SignalConnector()
    try:
        assert connector.register((SIG,), lambda signum: heard.append(signum.name))
        os.kill(os.getpid(), SIG)
        assert heard == ["SIGUSR1", "script"]
        assert connector.teardown()
        assert signal.getsignal(SIG) is scripts_own
    finally:
        signal.signal(SIG, before)


def test_without_chaining_the_action_alone_decides_and_a_second_register_changes_nothing() -> None:
    heard: list[str] = []
    before = signal.signal(SIG, lambda signum, frame: heard.append("script"))
    connector = SignalConnector()
    try:
        connector.register((SIG,), lambda signum: heard.append("first"), chain=False)
        installed = signal.getsignal(SIG)
        connector.register((SIG,), lambda signum: heard.append("second"))
        assert signal.getsignal(SIG) is installed
        os.kill(os.getpid(), SIG)
        assert heard == ["first"]
    finally:
        connector.teardown()
        signal.signal(SIG, before)


def test_off_the_main_thread_nothing_changes() -> None:
    before = signal.getsignal(SIG)
    connector = SignalConnector()
    answers: list[bool] = []
    worker = threading.Thread(target=lambda: answers.extend([connector.register((SIG,), lambda signum: None),
                                                             connector.end_at_once((SIG,)), connector.teardown()]))
    worker.start()
    worker.join()
    assert answers == [False, False, False]
    assert signal.getsignal(SIG) is before


def test_the_built_in_trainer_ends_at_once_before_training_and_records_the_stop_after() -> None:
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    stop = StopFlag()
    try:
        stop.end_at_once()
        assert all(signal.getsignal(signum) == signal.SIG_DFL for signum in before)
        stop.install()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.signal_name == "SIGTERM"
    finally:
        stop.signals.teardown()
    assert {signum: signal.getsignal(signum) for signum in before} == before
