"""A checkpoint whose files state no step (Keras's `model.keras`, a file the job names itself) is known by when
it was written: its version, the newest of its files' modification times in whole seconds.

A version stands where a step number goes (S3's keys, latest.json, events), so versions order as the saves
were written, across instances too. No training runs 10^9 steps, so a number at or above VERSION_FLOOR is a
version and never a step: every line says so, and every figure that counts steps says it is unknown.
Standard library only: every room that shows a step reads the rule from here.
"""

from __future__ import annotations

from datetime import UTC, datetime

VERSION_FLOOR = 1_000_000_000  # 2001-09-09 as a time; a billion as a step count, which no job reaches


def is_version(step: int | None) -> bool:
    return step is not None and step >= VERSION_FLOOR


def version_of(mtime: float) -> int:
    return max(VERSION_FLOOR, int(mtime))


def step_text(step: int) -> str:
    """'step 250', or for a version 'version 2026-12-04T18:30:12Z (step unknown)'."""
    if not is_version(step):
        return f"step {step}"
    return f"version {datetime.fromtimestamp(step, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} (step unknown)"
