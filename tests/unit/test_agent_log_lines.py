"""The agent's stdout and stderr are one stream in journald (and the local spot cloud's journal): a
progress bar's fragment on the command's stderr must never swallow a JSON event line from its stdout,
or the event is lost to every reader of the log."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from spot_trainer.agent.records.log_lines import route_runtime_warnings
from spot_trainer.agent.records.telemetry import RunTelemetry

# The command's two output pumps, each its own thread as in CommandProcess, feed the agent's telemetry.
FORWARD_BOTH_STREAMS = """
import threading
from spot_trainer.agent.records.log_lines import route_runtime_warnings
from spot_trainer.agent.records.telemetry import RunTelemetry

telemetry = RunTelemetry(store=None, cloud=None)  # output forwarding needs neither S3 nor CloudWatch

def bar() -> None:
    for n in range(3000):
        telemetry.command_output("stderr", f"\\r {n}/3000 [00:01<00:02, 2100.05it/s]\\r {n + 1}/3000")

def events() -> None:
    for n in range(3000):
        telemetry.command_output("stdout", '{"event": "step", "step": %d}' % n)

threads = [threading.Thread(target=bar), threading.Thread(target=events)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def test_an_event_line_is_never_glued_to_a_progress_bar_fragment(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    with journal.open("wb") as sink:  # one file behind both streams, as journald sees a service
        subprocess.run([sys.executable, "-c", FORWARD_BOTH_STREAMS], stdout=sink, stderr=sink, check=True,
                       timeout=120)
    lines = journal.read_text().split("\n")
    glued = [line for line in lines if '{"event"' in line and not line.startswith('{"event"')]
    assert not glued, f"{len(glued)} event lines glued to other output, e.g. {glued[0][-120:]!r}"
    assert sum(line.startswith('{"event"') for line in lines) == 3000


def test_an_event_behind_a_progress_bar_on_stdout_is_read_and_logged_on_a_line_of_its_own(
    capsys: pytest.CaptureFixture[str]
) -> None:
    # Lightning's tqdm bar writes to stdout, ending in no newline: the callback's event follows it.
    telemetry = RunTelemetry(store=None, cloud=None)  # type: ignore[arg-type]  # forwarding needs no S3
    bar = "\rEpoch 0:  14%|█▍        | 9/64 [00:01<00:07,  7.21it/s]"
    telemetry.command_output("stdout", bar + '{"event": "group_stop", "step": 9, "rank": 0}')
    assert telemetry.group_stop_step == 9  # the world's stop is seen, not lost behind the bar
    assert capsys.readouterr().out.split("\n") == [bar, '{"event": "group_stop", "step": 9, "rank": 0}', ""]


def test_the_runtimes_own_warnings_become_agent_log_lines_once() -> None:
    first: list[str] = []
    lines: list[str] = []
    runtime = logging.getLogger("spot_trainer")
    before = list(runtime.handlers)
    try:
        route_runtime_warnings(first.append)
        route_runtime_warnings(lines.append)  # a second agent in the process: one line each, to the latest
        remote = logging.getLogger("spot_trainer.storage.steps.remote")
        remote.warning("checkpoint step %d is damaged (%s); trying an older one", 500, "state.pt: sha256 differs")
        remote.info("restored step %d", 400)  # progress the agent reports itself
    finally:
        runtime.handlers[:] = before
    assert (first, lines) == ([], ["checkpoint step 500 is damaged (state.pt: sha256 differs); trying an older one"])
