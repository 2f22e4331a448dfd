"""The agent's failed starts, counted beside its settings file: the same line in a row adds up, anything
else begins the count anew, and nothing is counted (nor written) without a settings file."""

from __future__ import annotations

from pathlib import Path

from spot_trainer.agent.records.failed_starts import FILE_NAME, START_SECONDS, FailedStarts


def test_the_same_failure_adds_up_and_another_begins_anew(tmp_path: Path) -> None:
    starts = FailedStarts.beside(tmp_path / "agent.env")
    assert [starts.count("S3 unreachable", 2.0) for _ in range(3)] == [1, 2, 3]
    assert starts.count("lease lost", 2.0) == 1
    assert starts.count("S3 unreachable", 2.0) == 1


def test_a_run_past_its_start_is_not_a_failed_start(tmp_path: Path) -> None:
    starts = FailedStarts.beside(tmp_path / "agent.env")
    starts.count("lease lost", 2.0)
    assert starts.count("lease lost", START_SECONDS + 1) == 1


def test_a_start_that_got_going_clears_the_count(tmp_path: Path) -> None:
    starts = FailedStarts.beside(tmp_path / "agent.env")
    starts.count("S3 unreachable", 2.0)
    starts.clear()
    assert not (tmp_path / FILE_NAME).exists()
    assert starts.count("S3 unreachable", 2.0) == 1


def test_a_damaged_count_begins_anew(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text('{"message": "S3 unreachable", "count": "nine"}')
    assert FailedStarts.beside(tmp_path / "agent.env").count("S3 unreachable", 2.0) == 1


def test_without_a_settings_file_nothing_is_counted_or_written(tmp_path: Path) -> None:
    starts = FailedStarts.beside(None)
    assert [starts.count("S3 unreachable", 2.0) for _ in range(3)] == [1, 1, 1]
    starts.clear()
    assert list(tmp_path.iterdir()) == []
