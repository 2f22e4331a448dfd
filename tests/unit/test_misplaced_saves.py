"""Where a command's own saves lie under its working directory: new, complete checkpoints only."""

from __future__ import annotations

import json
import os
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from spot_trainer.agent.watches.misplaced_saves import find_misplaced_save
from spot_trainer.agent.watches.save_watch import SaveWatch


def hf_checkpoint(folder: Path, step: int, *, age_seconds: float = 0) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if age_seconds:
        stamp = time.time() - age_seconds
        os.utime(path, (stamp, stamp))
    return path


def test_the_folder_of_the_newest_new_save_is_named_from_the_working_directory(tmp_path: Path) -> None:
    started = time.time() - 5
    hf_checkpoint(tmp_path / "runs/exp-1", 40)
    hf_checkpoint(tmp_path / "runs/exp-1", 80)
    hf_checkpoint(tmp_path / "scratch", 20)
    found = find_misplaced_save(tmp_path, tmp_path / "checkpoints", since=started)
    assert found is not None
    assert (found.folder, found.name, found.relative) == (tmp_path / "runs/exp-1", "checkpoint-80", "runs/exp-1")


def test_a_checkpoint_shipped_with_the_code_is_no_save(tmp_path: Path) -> None:
    # Fine-tuning code often ships the checkpoint it starts from; it was there before the command ran.
    hf_checkpoint(tmp_path / "pretrained", 1000, age_seconds=3600)
    assert find_misplaced_save(tmp_path, tmp_path / "checkpoints", since=time.time() - 5) is None


def test_half_written_saves_virtual_envs_dot_folders_and_the_watched_folder_are_left_out(tmp_path: Path) -> None:
    started = time.time() - 5
    (tmp_path / "outputs/checkpoint-30").mkdir(parents=True)  # no trainer_state.json yet: not complete
    hf_checkpoint(tmp_path / ".cache", 10)
    (tmp_path / "env").mkdir()
    (tmp_path / "env/pyvenv.cfg").write_text("home = /usr/bin\n")
    hf_checkpoint(tmp_path / "env/lib", 10)
    hf_checkpoint(tmp_path / "checkpoints", 10)
    assert find_misplaced_save(tmp_path, tmp_path / "checkpoints", since=started) is None


def test_a_working_directory_that_is_the_watched_folder_has_nothing_misplaced(tmp_path: Path) -> None:
    hf_checkpoint(tmp_path, 10)
    assert find_misplaced_save(tmp_path, tmp_path, since=0) is None


def watch_warnings(workdir: Path, save: Callable[[], object]) -> list[str]:
    """What a watch started before `save` ran (as the command starts, then saves) warns at its next look."""
    warnings: list[str] = []
    watch = SaveWatch(workdir / "checkpoints", 3600, warnings.append, workdir=workdir, look_every_seconds=0)
    watch.start(resumed=False)
    save()
    watch.check(None)
    watch.check(None)
    return warnings


def test_the_warning_gives_the_job_file_line_for_a_fixed_folder(tmp_path: Path) -> None:
    (warning,) = watch_warnings(tmp_path, lambda: hf_checkpoint(tmp_path / "outputs", 50))
    assert warning.startswith(f"the command saves its checkpoints in {tmp_path / 'outputs'} (checkpoint-50)")
    assert warning.endswith('Set run.checkpoint_dir = "outputs" in the job file (or save into $CHECKPOINT_DIR)')


def lightning_default_save(workdir: Path) -> None:
    """Lightning's default: lightning_logs/version_<N>/checkpoints, a new N each run."""
    folder = workdir / "lightning_logs/version_0/checkpoints"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "epoch=0-step=64.ckpt", "w") as archive:
        archive.writestr("archive/data.pkl", b"weights")


def test_a_folder_numbered_per_run_is_not_offered_as_the_fix(tmp_path: Path) -> None:
    (warning,) = watch_warnings(tmp_path, lambda: lightning_default_save(tmp_path))
    assert "lightning_logs/version_0/checkpoints (epoch=0-step=64.ckpt)" in warning
    assert "numbered per run (Lightning's default): give ModelCheckpoint a fixed dirpath" in warning
    assert "Set run.checkpoint_dir =" not in warning


def test_saves_straight_into_the_working_directory_are_told_to_go_into_a_folder_of_their_own(tmp_path: Path) -> None:
    def save() -> None:
        (tmp_path / "ckpt_100.pt").write_bytes(b"x")
        (tmp_path / "ckpt_200.pt").write_bytes(b"x")  # a later one makes the earlier complete

    (warning,) = watch_warnings(tmp_path, save)
    assert "(ckpt_100.pt)" in warning and "Save them into a folder of their own" in warning
    assert 'run.checkpoint_dir = "."' not in warning  # a value the job file refuses


def test_a_run_folder_inside_the_watched_folder_is_named_in_full(tmp_path: Path) -> None:
    # output_dir=$CHECKPOINT_DIR/run1: the agent reads only the folder's top level.
    started = time.time() - 5
    watched = tmp_path / "agent-folder"
    hf_checkpoint(watched / "run1", 30)
    found = find_misplaced_save(tmp_path / "work", watched, since=started)
    assert found is not None and (found.folder, found.relative) == (watched / "run1", str(watched / "run1"))
    (tmp_path / "work").mkdir()
    hf_checkpoint(tmp_path / "work/outputs/run1", 40)
    found = find_misplaced_save(tmp_path / "work", tmp_path / "work/outputs", since=started)
    assert found is not None and found.relative == "outputs/run1"


def test_a_first_save_after_the_nothing_saved_warning_is_still_named(tmp_path: Path) -> None:
    # A script whose first save comes after the save interval the agent waits for (30 minutes).
    warnings: list[str] = []
    watch = SaveWatch(tmp_path / "checkpoints", 0.0, warnings.append, workdir=tmp_path, look_every_seconds=0)
    watch.start(resumed=False).check(None)
    assert len(warnings) == 1 and "no recognised checkpoint" in warnings[0]
    hf_checkpoint(tmp_path / "outputs", 500)
    watch.check(None)
    watch.check(None)
    assert len(warnings) == 2 and 'Set run.checkpoint_dir = "outputs"' in warnings[1]
