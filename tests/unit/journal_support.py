"""Journals written and read as the player does: a line appended, then polled at a given time."""

from __future__ import annotations

from pathlib import Path

from localcloud.journal import TrainingLog


def journal_with(path: Path, entries: list[tuple[float, str]]) -> TrainingLog:
    """Lines appended and read at the given times, as the player polls a live journal."""
    log = TrainingLog(path)
    path.write_text("")
    for at, line in entries:
        with open(path, "a") as journal:
            journal.write(line + "\n")
        log.poll(now=at)
    return log


def step(number: int) -> str:
    return f'{{"event": "step", "step": {number}}}'


def resumed(number: int) -> str:
    return f'{{"event": "resumed", "step": {number}}}'
