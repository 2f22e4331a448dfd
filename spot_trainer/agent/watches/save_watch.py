"""Says so, loudly, when what a training command saves would be lost.

A script that writes its checkpoints under a name no layout knows, or into a folder of its own,
would otherwise train for days and lose everything at the first interruption. A checkpoint that
appears elsewhere under the working directory is named at the next look (once a minute), with the
job-file line that fixes it. Otherwise, once the command has run past the expected save interval
(or exits) with no recognised checkpoint, one warning names what CHECKPOINT_DIR holds and the
layouts the agent accepts. A command given a checkpoint that saves below it has started over
(started_over.py). Each goes to the log, status.json and `status`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...storage.saves import fixed_names, layouts
from .misplaced_saves import MisplacedSave, find_misplaced_save
from .started_over import find_restart_from_scratch, started_over_warning


def nothing_saved_warning(directory: Path, seconds: float) -> str:
    holds = f"{directory} holds {layouts.describe(directory)}"
    if named := sorted(fixed_names.named()):
        missing = [name for name in named if not (directory / name).exists()]
        said = ", ".join(missing or named)
        why = "never appeared" if missing else "never proved whole (or states no step and was never still 2 s)"
        return (f"no recognised checkpoint after {seconds:.0f}s of training: run.checkpoint_files names {said}, "
                f"which {why}: {holds} (see docs/own-code.md, One checkpoint file rewritten in place)")
    return (f"no recognised checkpoint after {seconds:.0f}s of training: {holds}; the agent uploads "
            f"{'; '.join(layouts.accepted())} (see docs/own-code.md, The checkpoint layouts the agent recognises)")


# Lightning's loggers number a new version_<N> folder per run, so a fresh instance would save elsewhere.
_RUN_NUMBERED = re.compile(r"(^|/)version_\d+(/|$)")


def misplaced_save_warning(directory: Path, save: MisplacedSave) -> str:
    lost = (f"the command saves its checkpoints in {save.folder} ({save.name}), not in CHECKPOINT_DIR "
            f"{directory}: none is uploaded, so an interruption loses them.")
    if save.relative == ".":
        return (f"{lost} Save them into a folder of their own and name it in run.checkpoint_dir (e.g. "
                '"outputs"), or into $CHECKPOINT_DIR')
    if _RUN_NUMBERED.search(save.relative):
        return (f"{lost} That folder is numbered per run (Lightning's default): give ModelCheckpoint a fixed "
                "dirpath and name it in run.checkpoint_dir, or use dirpath=os.environ[\"CHECKPOINT_DIR\"]")
    return f'{lost} Set run.checkpoint_dir = "{save.relative}" in the job file (or save into $CHECKPOINT_DIR)'


@dataclass
class SaveWatch:
    directory: Path
    warn_after_seconds: float
    warn: Callable[[str], None]
    workdir: Path | None = None  # the command's working directory, where a script's own folder lies
    look_every_seconds: float = 60.0  # how often the working directory is searched for saves
    started: float = 0.0
    started_at: float = 0.0  # wall clock, to tell a new save from a file shipped with the code
    looked: float = 0.0
    seen_checkpoint: bool = False
    warned_nothing: bool = False  # said once; the looks go on, as a script may first save after it
    warned_misplaced: bool = False
    restored: Path | None = None  # the checkpoint this run of the command was given to resume from
    restored_step: int = 0  # read once: a framework may write that file again with a later step (last.ckpt)
    warned_started_over: bool = False

    def start(self, *, resumed: bool, restored: Path | None = None) -> SaveWatch:
        """A new run of the command; a restored checkpoint counts as seen until the command saves."""
        self.started, self.started_at, self.seen_checkpoint = time.monotonic(), time.time(), resumed
        self.looked, self.restored = self.started, restored
        self.restored_step = (layouts.step_of(restored) or 0) if restored is not None else 0
        return self

    def check(self, newest: object | None, *, exited: bool = False) -> None:
        """Called from the poll loop with the newest complete checkpoint (None when there is none)."""
        if self.restored is not None and not self.warned_started_over:
            self._look_for_a_fresh_start(self.restored)
        if newest is not None:
            self.seen_checkpoint = True
        if self.seen_checkpoint or self.warned_misplaced:
            return
        now = time.monotonic()
        due = not self.warned_nothing and (exited or now - self.started >= self.warn_after_seconds)
        if due or exited or now - self.looked >= self.look_every_seconds:
            self.looked = now
            if misplaced := self._misplaced():
                self.warned_misplaced = True
                self.warn(misplaced_save_warning(self.directory, misplaced))
                return
        if due:
            self.warned_nothing = True
            self.warn(nothing_saved_warning(self.directory, now - self.started))

    def _look_for_a_fresh_start(self, restored: Path) -> None:
        if saved := find_restart_from_scratch(self.directory, self.restored_step, since=self.started_at - 1.0):
            self.warned_started_over = True
            self.warn(started_over_warning(saved, restored, self.restored_step))

    def _misplaced(self) -> MisplacedSave | None:
        if self.workdir is None or not self.workdir.is_dir():
            return None
        # File times come from the kernel's coarse clock, a tick behind time.time(): allow a second.
        return find_misplaced_save(self.workdir, self.directory, since=self.started_at - 1.0)
