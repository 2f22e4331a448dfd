"""Finds a command that was given a checkpoint and started over instead of resuming from it.

A script that loads neither RESUME_FROM nor the newest checkpoint in CHECKPOINT_DIR trains from step 0
after every interruption. What it saves stays below the restored step, so none of it is uploaded, and
a job longer than one spot instance's life never ends. Its first such save is the proof: a complete
checkpoint below the restored step, written since the command started.
"""

from __future__ import annotations

from pathlib import Path

from ...storage.saves import frameworks, layouts
from ...storage.saves.library_saves import ACCELERATE, library_of

_ACCELERATE_HINT = ('call accelerator.load_state(os.environ["RESUME_FROM"]) after accelerator.prepare() (the '
                    "diffusers training scripts: --resume_from_checkpoint latest)")
_ANY_HINT = "load $RESUME_FROM (the newest checkpoint in CHECKPOINT_DIR) before the first step"


def find_restart_from_scratch(directory: Path, restored_step: int, since: float) -> layouts.Checkpoint | None:
    """The lowest complete checkpoint below `restored_step` written at or after `since` (epoch seconds)."""
    below = layouts.complete_below(directory, restored_step, keep=lambda path: _written_since(path, since))
    return min(below, key=lambda found: found.step, default=None)


def started_over_warning(saved: layouts.Checkpoint, restored: Path, restored_step: int) -> str:
    # What loads the newest checkpoint, in the words of the framework the script saves with.
    hint = _ACCELERATE_HINT if library_of(saved.path) == ACCELERATE else (
        frameworks.framework_of(saved.layout).resume_hint or _ANY_HINT)
    return (f"the command started over: it saved {saved.path.name} (step {saved.step}) after {restored.name} (step "
            f"{restored_step}) was restored for it, so every interruption costs the whole run and nothing it "
            f"saves below step {restored_step} is uploaded. To resume, {hint}")


def _written_since(path: Path, since: float) -> bool:
    try:
        return path.stat().st_mtime >= since
    except OSError:  # pruned while we looked
        return False
