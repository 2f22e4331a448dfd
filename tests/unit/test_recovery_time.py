"""The local report's recovery time: from an interruption to the first step after the next resume,
whichever instance took training up (a replacement, or the surviving nodes of a world)."""

from __future__ import annotations

from pathlib import Path

from localcloud.journal import TrainingLog, training_again_after


def journal_with(path: Path, entries: list[tuple[float, str]]) -> TrainingLog:
    """Lines appended and read at the given times, as the player polls a live journal."""
    log = TrainingLog(path)
    path.write_text("")
    for at, line in entries:
        with open(path, "a") as journal:
            journal.write(line + "\n")
        log.poll(now=at)
    return log


def test_training_is_going_again_at_the_first_step_after_a_resume(tmp_path: Path) -> None:
    first = journal_with(tmp_path / "a.log", [
        (1.0, '{"event": "step", "step": 1}'),
        (10.0, '{"event": "resumed", "step": 1}'),  # survivors re-formed after a loss at t=8
        (14.0, '{"event": "step", "step": 2}'),
        (15.0, '{"event": "step", "step": 3}'),
    ])
    replacement = journal_with(tmp_path / "b.log", [
        (30.0, '{"event": "resumed", "step": 3}'),
        (33.0, '{"event": "step", "step": 4}'),
    ])
    logs = [first, replacement]
    assert training_again_after(logs, 8.0) == 14.0
    assert training_again_after(logs, 20.0) == 33.0
    assert training_again_after(logs, 40.0) is None  # nobody has resumed since
