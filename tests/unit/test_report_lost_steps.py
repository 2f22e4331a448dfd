"""The local report's completed steps lost: measured where the script prints its steps, a lower bound from the
lost instance's own disk where it does not, and `unknown` where neither is known, never a 0 that means it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from localcloud.interruptions import HARD, Interruption
from localcloud.journal import TrainingLog
from localcloud.lost_work import Basis, held_on_disk, lost_phrase, lost_steps


def silent_log(tmp_path: Path) -> TrainingLog:
    """A script that prints no step: the agent's uploads are all the journal shows of it."""
    log = TrainingLog(tmp_path / "journal.log")
    log.take([], [{"kind": "start", "epoch": 1.0}, {"kind": "checkpoint", "step": 20, "published": True,
                                                    "epoch": 5.0}], 6.0)
    return log


def printing_log(tmp_path: Path, last: int) -> TrainingLog:
    log = TrainingLog(tmp_path / "journal.log")
    log.take([f'{{"event": "step", "step": {step}}}' for step in range(1, last + 1)], [{"kind": "start", "epoch": 1.0}],
             6.0)
    return log


def disk_with(tmp_path: Path, *steps: int, cut_short: int | None = None) -> Path:
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for step in (*steps, *([cut_short] if cut_short else [])):
        path = folder / f"checkpoint_{step}.pt"
        torch.save({"step": step, "w": torch.ones(32)}, path)
        written = time.time() - 10 + step / 10
        os.utime(path, (written, written))
    if cut_short:
        cut = folder / f"checkpoint_{cut_short}.pt"
        cut.write_bytes(cut.read_bytes()[:-40])
    return folder


def test_a_silent_script_counts_from_the_newest_whole_checkpoint_on_the_lost_disk(tmp_path: Path) -> None:
    held = held_on_disk(disk_with(tmp_path, 20, 40, cut_short=60))  # the power-off came during the save of 60
    record = Interruption(HARD, "i-1", at=10.0, reached_step=20, resumed_step=20)
    loss = lost_steps(record, silent_log(tmp_path), held)
    assert (held, loss.steps, loss.basis) == (40, 20, Basis.DISK)
    assert lost_phrase([loss]).startswith("at least 20 (the script prints no step: the newest checkpoint")


def test_a_silent_script_with_nothing_on_the_disk_is_unknown_not_zero(tmp_path: Path) -> None:
    record = Interruption(HARD, "i-1", at=10.0, reached_step=20, resumed_step=20)
    losses = [lost_steps(record, silent_log(tmp_path), held_on_disk(None))]
    assert losses[0].steps is None
    assert lost_phrase(losses) == "unknown (the script prints no step)"


def test_a_script_that_prints_its_steps_is_measured(tmp_path: Path) -> None:
    record = Interruption(HARD, "i-1", at=10.0, reached_step=57, resumed_step=40)
    loss = lost_steps(record, printing_log(tmp_path, 57), held_on_disk(disk_with(tmp_path, 20, 40)))
    assert (loss.steps, loss.basis) == (17, Basis.PRINTED)
    assert lost_phrase([loss, loss]) == "34 (measured from the steps the script printed)"


def test_an_interruption_nobody_resumed_after_is_unknown(tmp_path: Path) -> None:
    record = Interruption(HARD, "i-1", at=10.0, reached_step=57)
    assert lost_phrase([lost_steps(record, printing_log(tmp_path, 57), None)]) == (
        "unknown (no instance resumed after it)")
