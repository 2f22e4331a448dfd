"""A big download shows its progress on one line of a terminal, and nothing where no one watches."""

from __future__ import annotations

import io

from spot_trainer.ops.progress_line import MB, ProgressLine


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_bytes_so_far_on_one_line() -> None:
    screen = Terminal()
    progress = ProgressLine(100 * MB, screen)
    progress(25 * MB)
    progress(75 * MB)
    progress.end()
    frames = screen.getvalue().split("\r")[1:]
    assert frames[0].startswith("[#######.......................]     25.0 of 100.0 MB")
    assert frames[-1] == "[##############################]    100.0 of 100.0 MB\n"


def test_a_log_or_a_small_download_gets_nothing() -> None:
    log, small = io.StringIO(), Terminal()
    for stream, total in ((log, 100 * MB), (small, 10 * MB)):
        progress = ProgressLine(total, stream)
        progress(total)
        progress.end()
        assert stream.getvalue() == ""
