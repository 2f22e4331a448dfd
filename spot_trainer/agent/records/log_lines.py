"""One line of the agent's log, written whole.

journald (and the local spot cloud's journal) sees the agent's stdout and stderr as one stream, and
several threads write to them: the command's two output pumps, the uploader, the lease keeper, the
main loop. `print` writes a line and its newline separately, and a progress bar's fragment (ending in
'\\r', which line buffering flushes at once) would take the next thread's line onto its own: a JSON
event glued behind a bar is lost to every reader of the log. One lock, one write, one flush per line.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import TextIO

_lock = threading.Lock()


def write_line(line: str, stream: TextIO | None = None) -> None:
    """`line` and its newline on `stream` (stderr by default), never split by another thread's line."""
    target = stream if stream is not None else sys.stderr
    with _lock:
        target.write(line + "\n")
        target.flush()


def agent_line(line: str) -> None:
    """One of the agent's own log lines, marked as such."""
    write_line(f"spot-trainer: {line}")


class _AgentLog(logging.Handler):
    def __init__(self, log: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        self.log(record.getMessage())


def route_runtime_warnings(log: Callable[[str], None]) -> None:
    """The runtime's own warnings (a damaged checkpoint skipped, a step not published, the lease lost)
    become agent log lines, and so reach CloudWatch Logs too; without, Python's last-resort handler
    would print them bare. Idempotent: the latest agent's log replaces an earlier one."""
    runtime = logging.getLogger(__name__.split(".")[0])
    for handler in [handler for handler in runtime.handlers if isinstance(handler, _AgentLog)]:
        runtime.removeHandler(handler)
    runtime.addHandler(_AgentLog(log))
