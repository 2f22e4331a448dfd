"""The report's interruptions line: a demo whose job outran the planned interruptions says so, and why."""

from __future__ import annotations

from pathlib import Path

from localcloud.interruptions import InterruptionPlan
from localcloud.journal import TrainingLog
from localcloud.reclaims import STARTUP_ALLOWANCE_SECONDS, training_since
from localcloud.report import NO_PROGRESS, VERSIONS, planned_interruptions, progress_source, unfired_phrase


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


def test_a_command_that_showed_no_progress_is_told_so_not_to_lower_the_spacing() -> None:
    phrase = unfired_phrase(planned=2, happened=0, every_seconds=20.0, showed_progress=False)
    assert "never showed progress (no step line, no checkpoint the agent recognised)" in phrase
    assert "--interrupt-every" not in phrase


def test_a_schedule_in_time_counts_from_the_first_progress_or_a_minute_after_the_agent_started(
        tmp_path: Path) -> None:
    log = TrainingLog(tmp_path / "journal.log")
    assert training_since(log) is None, "no agent yet: nothing trains"
    log.agent_started_at = 1000.0
    assert training_since(log) == 1000.0 + STARTUP_ALLOWANCE_SECONDS, "a command that shows nothing"
    log.first_step_at = 1005.0
    assert training_since(log) == 1005.0


def test_progress_is_steps_checkpoints_versions_or_nothing(tmp_path: Path) -> None:
    log = TrainingLog(tmp_path / "journal.log")
    assert progress_source([log]) == NO_PROGRESS
    log.versions_seen = 1
    assert progress_source([log]) == VERSIONS
    log.max_step = 30
    assert progress_source([log]) == "checkpoints"
    log.reports_steps = True
    assert progress_source([log]) == "steps"
