"""What each interruption cost in completed steps, from what the lost instance really did, and how it is known.

    measured   the command prints its steps: the highest it printed against the step the next round
               resumed from
    at least   it prints none: the newest whole checkpoint the lost instance held on its disk against that
               resume (the steps it ran after its last save are unseen, so this is a lower bound)
    unknown    neither: never a 0 that means "not known"
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from localcloud.interruptions import Interruption
from localcloud.journal import TrainingLog
from spot_trainer.storage.checkpoint_versions import is_version
from spot_trainer.storage.saves import layouts


class Basis(StrEnum):
    PRINTED = "measured from the steps the script printed"
    DISK = "the newest checkpoint the lost instance held on its disk, against the step the next round resumed from"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class LostSteps:
    steps: int | None  # None: not known
    basis: Basis
    why_unknown: str = ""


def held_on_disk(checkpoint_dir: Path | None) -> int | None:
    """The newest whole checkpoint left on a lost instance's disk (a cut-short save does not count)."""
    if checkpoint_dir is None:
        return None
    newest = layouts.newest_complete(checkpoint_dir, writer_done=True)
    return newest.step if newest is not None else None


def lost_steps(record: Interruption, log: TrainingLog, held_step: int | None) -> LostSteps:
    if record.resumed_step is None:
        return LostSteps(None, Basis.UNKNOWN, "no instance resumed after it")
    if log.reports_steps and record.lost_steps is not None:
        return LostSteps(record.lost_steps, Basis.PRINTED)
    if is_version(held_step) or is_version(record.resumed_step):
        return LostSteps(None, Basis.UNKNOWN, "the checkpoints state no step: they go by the time they were written")
    if held_step is not None:
        return LostSteps(max(0, held_step - record.resumed_step), Basis.DISK)
    return LostSteps(None, Basis.UNKNOWN, "the script prints no step")


def lost_phrase(losses: Sequence[LostSteps]) -> str:
    """'45 (measured from ...)', 'at least 40 (...)' or 'unknown (the script prints no step)'."""
    if not losses:
        return "0 (no interruption)"
    if unknown := [loss.why_unknown for loss in losses if loss.steps is None]:
        return f"unknown ({'; '.join(sorted(set(unknown)))})"
    total = sum(loss.steps or 0 for loss in losses)
    if all(loss.basis is Basis.PRINTED for loss in losses):
        return f"{total} ({Basis.PRINTED})"
    return (f"at least {total} (the script prints no step: {Basis.DISK}; the steps after its last save are "
            "unseen)")
