"""Journals written and read as the player does: a line appended, or an agent's event recorded, then
read at a given time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localcloud.journal import RESUMED, ROUND_FORMED, ROUND_RESUMED, STARTED, UPLOADED, TrainingLog

Entry = str | dict[str, Any]  # a journal line, or an event of the instance's agent


def journal_with(path: Path, entries: list[tuple[float, Entry]]) -> TrainingLog:
    """Lines appended and events recorded at the given times, as the player reads a live instance."""
    log = TrainingLog(path)
    path.write_text("")
    for at, entry in entries:
        if isinstance(entry, dict):
            log.take([], [{**entry, "epoch": at, "instance": path.name}], at)
            continue
        with open(path, "a") as journal:
            journal.write(entry + "\n")
        log.poll(now=at)
    return log


def step(number: int) -> str:
    return f'{{"event": "step", "step": {number}}}'


def resumed(number: int) -> str:
    return f'{{"event": "resumed", "step": {number}}}'


def fresh() -> dict[str, Any]:
    """The agent took up the job, and restores nothing after: training begins at step 0."""
    return {"kind": STARTED, "attempt": 1}


def restored(number: int) -> dict[str, Any]:
    """The agent restored checkpoint `number` before starting the command."""
    return {"kind": RESUMED, "step": number}


def uploaded(number: int, published: bool = True) -> dict[str, Any]:
    return {"kind": UPLOADED, "step": number, "upload_seconds": 0.05, "bytes": 31969, "published": published}


def round_formed(number: int, nodes: int, group_rank: int) -> dict[str, Any]:
    return {"kind": ROUND_FORMED, "number": number, "nodes": nodes, "group_rank": group_rank}


def round_resumed(number: int) -> dict[str, Any]:
    return {"kind": ROUND_RESUMED, "step": number}
