"""A demo whose job cannot finish before --timeout says so once its pace is known."""

from __future__ import annotations

from pathlib import Path

from localcloud.pace import overrun_line

from .journal_support import fresh, journal_with, resumed, step

FRESH = fresh()


def test_a_job_too_long_for_the_timeout_is_named_with_its_pace(tmp_path: Path) -> None:
    log = journal_with(tmp_path / "a.log", [(0.0, FRESH), (10.0, step(10)), (30.0, step(210))])  # 10 steps/s
    line = overrun_line([log], total_steps=20000, elapsed=40.0, timeout=900.0)
    assert line == ("at 10.0 steps/s the 19790 steps left need about 33 min, past --timeout 900s: "
                    'give fewer (--train-args "... --steps N") or a longer --timeout')


def test_a_job_that_fits_or_whose_pace_is_not_known_yet_says_nothing(tmp_path: Path) -> None:
    fits = journal_with(tmp_path / "a.log", [(0.0, FRESH), (10.0, step(10)), (30.0, step(210))])
    assert overrun_line([fits], total_steps=5000, elapsed=40.0, timeout=900.0) is None
    early = journal_with(tmp_path / "b.log", [(0.0, resumed(100)), (2.0, step(110)), (5.0, step(140))])
    assert overrun_line([early], total_steps=20000, elapsed=10.0, timeout=60.0) is None  # 3 s of steps only
