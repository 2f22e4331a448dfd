"""The report's interruptions line: a demo whose job outran the planned interruptions says so, and why."""

from __future__ import annotations

from localcloud.interruptions import InterruptionPlan
from localcloud.report import planned_interruptions, unfired_phrase


def test_interruptions_the_job_outran_are_named_with_the_flag_that_spaces_them() -> None:
    phrase = unfired_phrase(planned=2, happened=0, every_seconds=20.0)
    assert phrase.startswith("; 2 of the 2 planned never came: the job ended first")
    assert "each 20s of training" in phrase and "--interrupt-every" in phrase


def test_a_schedule_over_known_steps_names_no_flag() -> None:
    phrase = unfired_phrase(planned=3, happened=1, every_seconds=None)
    assert phrase == "; 2 of the 3 planned never came: the job ended first"


def test_nothing_is_added_when_every_planned_interruption_came() -> None:
    assert unfired_phrase(planned=3, happened=3, every_seconds=20.0) == ""
    assert unfired_phrase(planned=0, happened=2, every_seconds=None) == ""  # a --rate plans no number


def test_the_schedule_plans_announced_and_hard_kills_and_a_rate_plans_none() -> None:
    assert planned_interruptions(InterruptionPlan(count=3, hard_kills=1)) == 4
    assert planned_interruptions(InterruptionPlan(rate_per_hour=120)) == 0


def test_a_failed_job_is_not_told_to_space_its_interruptions_closer() -> None:
    phrase = unfired_phrase(planned=2, happened=0, every_seconds=20.0, state="FAILED")
    assert phrase == "; 2 of the 2 planned never came: the job was FAILED first"
