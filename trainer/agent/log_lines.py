"""One line of the agent's log, written whole.

journald (and the local spot cloud's journal) sees the agent's stdout and stderr as one stream, and
several threads write to them: the command's two output pumps, the uploader, the lease keeper, the
main loop. `print` writes a line and its newline separately, and a progress bar's fragment (ending in
'\\r', which line buffering flushes at once) would take the next thread's line onto its own: a JSON
event glued behind a bar is lost to every reader of the log. One lock, one write, one flush per line.
"""

from __future__ import annotations

import sys
import threading
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
