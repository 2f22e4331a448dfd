"""A download's progress on one line of a terminal; nothing at all when stderr is not one (logs, CI)."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

MB = 1_000_000
WORTH_SHOWING = 50 * MB  # a smaller download ends before a bar would tell anything


class ProgressLine:
    """Called with the bytes of each finished chunk, from the transfer's threads."""

    def __init__(self, total_bytes: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = total_bytes
        self.done = 0
        self.shown = self.stream.isatty() and total_bytes >= WORTH_SHOWING
        self._lock = threading.Lock()

    def __call__(self, chunk: int) -> None:
        with self._lock:
            self.done += chunk
            if self.shown:
                share = self.done / self.total if self.total else 1.0
                filled = int(share * 30)
                self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done / MB:8.1f} of "
                                  f"{self.total / MB:.1f} MB")
                self.stream.flush()

    def end(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


class DownloadBar:
    """A ProgressLine for a download whose size is known only once it begins (a checkpoint's restore, which
    reads its manifest first): the line starts with the first chunk, and a fallback to an older
    checkpoint starts a new one."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.line: ProgressLine | None = None
        self._lock = threading.Lock()

    def __call__(self, chunk: int, total_bytes: int) -> None:
        with self._lock:
            if self.line is None or self.line.total != total_bytes:
                self.end()
                self.line = ProgressLine(total_bytes, self.stream)
            line = self.line
        line(chunk)

    def end(self) -> None:
        if self.line is not None:
            self.line.end()
