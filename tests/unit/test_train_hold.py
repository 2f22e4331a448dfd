"""The built-in trainer's hold (--hold-at-step K --hold-while PATH): from step K on it waits at a step
boundary while the file exists, and a stop request or its one bound ends the wait."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from spot_trainer.builtin import hold as hold_module
from spot_trainer.builtin.group import SOLO
from spot_trainer.builtin.hold import Hold
from spot_trainer.builtin.stop_flag import StopFlag


def later(seconds: float, action: object) -> threading.Thread:
    thread = threading.Timer(seconds, action)  # type: ignore[arg-type]
    thread.start()
    return thread


def naps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The hold's sleeps, counted (and still slept)."""
    taken: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(hold_module.time, "sleep", lambda seconds: (taken.append(seconds), sleep(seconds)))
    return taken


def test_before_its_step_or_without_a_file_nothing_is_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate, taken = tmp_path / "hold", naps(monkeypatch)
    gate.touch()
    Hold(12, gate).wait(11, StopFlag(), SOLO)
    Hold(None, None).wait(50, StopFlag(), SOLO)
    Hold(12, tmp_path / "absent").wait(12, StopFlag(), SOLO)
    assert taken == []


def test_from_its_step_on_it_waits_until_the_file_goes(tmp_path: Path) -> None:
    gate = tmp_path / "hold"
    gate.touch()
    released = later(0.5, gate.unlink)
    started = time.monotonic()
    Hold(12, gate).wait(13, StopFlag(), SOLO)
    assert time.monotonic() - started >= 0.4 and not gate.exists()
    released.join()


def test_a_stop_request_ends_the_hold(tmp_path: Path) -> None:
    gate, stop = tmp_path / "hold", StopFlag()
    gate.touch()

    def request() -> None:
        stop.signal_name = "SIGTERM"

    requested = later(0.3, request)
    Hold(12, gate).wait(12, stop, SOLO)
    assert gate.exists() and stop.signal_name == "SIGTERM"
    requested.join()


def test_one_bound_for_the_whole_process_not_one_per_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hold_module, "HOLD_MOST_SECONDS", 0.3)
    gate = tmp_path / "hold"
    gate.touch()
    hold, taken = Hold(12, gate), naps(monkeypatch)
    hold.wait(12, StopFlag(), SOLO)  # held until the bound
    assert taken
    taken.clear()
    hold.wait(13, StopFlag(), SOLO)  # the bound has passed: no second hold
    assert taken == [] and gate.exists()
