"""The training command runs as a process group: signals reach every member, and 'exited' means all gone."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from spot_trainer.agent.program.command import CommandProcess
from spot_trainer.agent.program.stopping import Stopping
from spot_trainer.signals import parse_signal


def bash(script: str, **env: str) -> CommandProcess:
    lines: list[tuple[str, str]] = []
    process = CommandProcess(["/bin/bash", "-c", script], {**os.environ, **env},
                             sink=lambda stream, line: lines.append((stream, line)))
    process.lines = lines  # type: ignore[attr-defined]
    return process.start()


def wait_for_line(command: CommandProcess, line: str, timeout: float = 10) -> None:
    """Readiness is a line the command prints once its signal handling is in place."""
    deadline = time.monotonic() + timeout
    while ("stdout", line) not in command.lines:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"no {line!r} line within {timeout}s"
        time.sleep(0.01)


def test_stop_signal_reaches_a_grandchild_and_wait_covers_the_whole_group(tmp_path: Path) -> None:
    done = tmp_path / "saved"
    # The shell forks a child that saves for a while after SIGTERM; the shell itself dies at once.
    script = (f"(trap 'sleep 0.5; echo saved > {done}; exit 0' TERM; echo trapped; "
              "while true; do sleep 0.05; done) & wait")
    command = bash(script)
    wait_for_line(command, "trapped")
    code = command.stop(signal.SIGTERM, grace_seconds=10)
    assert done.read_text() == "saved\n", "stop() returned before the group finished its checkpoint"
    assert code == -signal.SIGTERM
    assert not command.group_alive()


def test_a_command_that_ignores_the_signal_is_killed_after_the_grace_period() -> None:
    command = bash("trap '' TERM; echo ready; while true; do sleep 0.05; done")
    wait_for_line(command, "ready")
    started = time.monotonic()
    code = command.stop(signal.SIGTERM, grace_seconds=0.5)
    assert code == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - started < 5
    assert not command.group_alive()


def test_output_lines_and_the_last_stderr_line_are_kept() -> None:
    command = bash('echo one; echo "warn: a" >&2; echo two; echo "fatal: disk full" >&2; exit 3')
    assert command.wait(timeout=10) == 3
    lines = command.lines  # type: ignore[attr-defined]
    assert ("stdout", "one") in lines and ("stdout", "two") in lines
    assert command.last_stderr_line == "fatal: disk full"


def test_a_failing_sink_does_not_block_the_command() -> None:
    def broken(stream: str, line: str) -> None:
        raise RuntimeError("log sink down")

    command = CommandProcess(["/bin/bash", "-c", "for i in $(seq 1 20000); do echo line $i; done"],
                             dict(os.environ), sink=broken).start()
    assert command.wait(timeout=30) == 0


@pytest.mark.parametrize(("name", "expected"), [("SIGTERM", signal.SIGTERM), ("int", signal.SIGINT),
                                                ("10", signal.SIGUSR1), (" sigusr2 ", signal.SIGUSR2)])
def test_signal_names(name: str, expected: signal.Signals) -> None:
    assert parse_signal(name) is expected


def test_unknown_signal_is_named() -> None:
    with pytest.raises(ValueError, match="unknown signal 'SIGFOO'"):
        parse_signal("SIGFOO")


def test_work_after_the_stop_signal_neither_delays_it_nor_adds_to_the_grace(tmp_path: Path) -> None:
    """A status write that waits on S3 for a while is done after the signal, inside the grace period."""
    received = tmp_path / "received"
    command = bash(f"trap 'date +%s.%N > {received}; exit 0' TERM; echo trapped; while true; do sleep 0.05; done")
    wait_for_line(command, "trapped")
    seen_during: list[bool] = []

    def slow_status_write() -> None:
        time.sleep(1.0)
        seen_during.append(received.exists())

    started = time.monotonic()
    code = command.stop(signal.SIGTERM, grace_seconds=5, after_signal=slow_status_write)
    assert seen_during == [True], "the command was signalled only after the slow write"
    assert code == 0 and time.monotonic() - started < 5


def test_a_stop_with_no_time_left_is_not_given_the_whole_grace_period() -> None:
    command = bash("trap '' TERM; echo ignoring; while true; do sleep 0.05; done")  # saves forever
    wait_for_line(command, "ignoring")
    log: list[str] = []
    telemetry = type("Telemetry", (), {"log": lambda self, line: log.append(line)})()
    notices = type("Notices", (), {"reclaim_at": None})()
    stopping = Stopping("SIGTERM", grace_seconds=60.0, notices=notices, telemetry=telemetry)  # type: ignore[arg-type]
    started = time.monotonic()
    assert stopping.command(command, grace_seconds=0.0) == -int(signal.SIGKILL)
    assert time.monotonic() - started < 10, "a budget of 0 s must not become the 60 s grace period"
