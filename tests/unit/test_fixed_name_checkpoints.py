"""A checkpoint kept under one name and rewritten at every save: recognised by the step its file states, with
the whole files beside it, once every one proves whole and has lain still; copied, never linked, for upload."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import torch

from spot_trainer.agent.records.notify import message_for
from spot_trainer.storage.checkpoint_versions import is_version, step_text
from spot_trainer.storage.files import staging
from spot_trainer.storage.record_kinds import EventKind
from spot_trainer.storage.saves import fixed_names, layouts
from spot_trainer.storage.saves.final_outputs import final_output_files

SETTLED = time.time() - 60


def save(path: Path, *, settled: bool = True, **entries: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": {"w": torch.arange(64.0)}, **entries}, path)
    if settled:
        os.utime(path, (SETTLED, SETTLED))
    return path


def test_ckpt_pt_is_the_job_s_checkpoint_at_the_step_inside_once_still(tmp_path: Path) -> None:
    save(tmp_path / "ckpt.pt", settled=False, iter_num=250)
    assert layouts.classify(tmp_path / "ckpt.pt") == layouts.Classified(layouts.Layout.FIXED, 250)
    assert layouts.newest_complete(tmp_path) is None, "just written: the script may still reopen it"
    assert layouts.newest_complete(tmp_path, writer_done=True).step == 250  # type: ignore[union-attr]
    os.utime(tmp_path / "ckpt.pt", (SETTLED, SETTLED))
    newest = layouts.newest_complete(tmp_path)
    assert newest is not None and (newest.step, newest.path.name, newest.layout) == (250, "ckpt.pt", "fixed")
    assert final_output_files(tmp_path) == {}, "the checkpoint is no final output"


def test_a_torn_rewrite_is_no_checkpoint(tmp_path: Path) -> None:
    whole = save(tmp_path / "ckpt.pt", iter_num=250).read_bytes()
    (tmp_path / "ckpt.pt").write_bytes(whole[: len(whole) // 2])  # a power-off mid torch.save
    os.utime(tmp_path / "ckpt.pt", (SETTLED, SETTLED))
    assert layouts.classify(tmp_path / "ckpt.pt") is None
    assert layouts.newest_complete(tmp_path, writer_done=True) is None


def test_the_imagenet_pair_goes_up_together_at_the_newest_epoch(tmp_path: Path) -> None:
    save(tmp_path / "checkpoint.pth.tar", epoch=5, arch="resnet18")
    save(tmp_path / "model_best.pth.tar", epoch=3, arch="resnet18")
    (tmp_path / "train.log").write_text("epoch 5\n")  # no self-describing format: not part of the save
    newest = layouts.newest_complete(tmp_path)
    assert newest is not None and (newest.step, newest.path.name) == (5, "checkpoint.pth.tar")
    entries = layouts.fixed_entries(newest.path)
    assert [entry.name for entry in entries or []] == ["checkpoint.pth.tar", "model_best.pth.tar"]


def test_a_companion_cut_short_holds_the_set_back(tmp_path: Path) -> None:
    save(tmp_path / "checkpoint.pth.tar", epoch=5)
    best = save(tmp_path / "model_best.pth.tar", epoch=5)
    best.write_bytes(best.read_bytes()[:100])  # shutil.copyfile still running
    os.utime(best, (SETTLED, SETTLED))
    assert layouts.newest_complete(tmp_path) is None
    assert layouts.newest_complete(tmp_path, writer_done=True) is None, "never whole: never uploaded"


def test_yolo_weights_folder_is_one_entry_at_its_highest_epoch(tmp_path: Path) -> None:
    save(tmp_path / "weights" / "last.pt", epoch=12)
    save(tmp_path / "weights" / "best.pt", epoch=9)
    (tmp_path / "weights" / "results.csv").write_text("epoch,map\n")
    assert layouts.newest_complete(tmp_path) is None, "a file of the folder was just written"
    os.utime(tmp_path / "weights" / "results.csv", (SETTLED, SETTLED))
    newest = layouts.newest_complete(tmp_path)
    assert newest is not None and (newest.step, newest.path.name, newest.layout) == (12, "weights", "fixed")


def test_weights_beside_a_state_file_that_names_the_epoch(tmp_path: Path) -> None:
    from tests.unit.test_stated_step import _safetensors  # the same small safetensors file

    _safetensors(tmp_path / "model.safetensors", None)
    (tmp_path / "state.json").write_text('{"epoch": 7}')
    for name in ("model.safetensors", "state.json"):
        os.utime(tmp_path / name, (SETTLED, SETTLED))
    newest = layouts.newest_complete(tmp_path)
    assert newest is not None and (newest.step, newest.path.name) == (7, "state.json")
    assert [entry.name for entry in layouts.fixed_entries(newest.path) or []] == ["state.json", "model.safetensors"]


def test_framework_names_keep_their_own_layouts(tmp_path: Path) -> None:
    (tmp_path / "trainer_state.json").write_text('{"global_step": 40}')  # HF's record of the run
    save(tmp_path / "checkpoint_40.pt", step=40)
    assert layouts.classify(tmp_path / "trainer_state.json") is None
    assert layouts.classify(tmp_path / "checkpoint_40.pt") == layouts.Classified(layouts.Layout.GENERIC, 40)
    assert layouts.fixed_entries(tmp_path / "checkpoint_40.pt") is None


def test_the_staged_copy_never_shares_the_file_the_script_truncates_next(tmp_path: Path) -> None:
    path = save(tmp_path / "ckpt.pt", iter_num=10)
    entries = layouts.fixed_entries(path)
    assert entries is not None
    view = staging.copy_set(entries, lambda copies: fixed_names.copies_whole(copies, 10))
    assert staging.set_named(view) == "ckpt.pt"
    assert os.stat(view / "ckpt.pt").st_ino != os.stat(path).st_ino
    before = (view / "ckpt.pt").read_bytes()
    with open(path, "r+b") as stream:  # torch.save's truncate, then a power-off
        stream.truncate(0)
    assert (view / "ckpt.pt").read_bytes() == before
    staging.release(view)
    assert not view.parent.exists()


def test_a_copy_that_caught_a_rewrite_half_way_is_refused(tmp_path: Path) -> None:
    old = save(tmp_path / "old.pt", iter_num=10).read_bytes()
    torch.save({"model": {"w": torch.arange(64.0) + 1}, "iter_num": 10}, tmp_path / "new.pt")
    new = (tmp_path / "new.pt").read_bytes()
    assert len(old) == len(new)
    mixed = save(tmp_path / "mixed" / "ckpt.pt", iter_num=10)
    mixed.write_bytes(old[: len(old) // 2] + new[len(old) // 2:])  # old bytes before the copy's place, new after
    assert fixed_names.copies_whole([tmp_path / "old.pt"], 10)
    assert not fixed_names.copies_whole([mixed], 10), "its structure reads whole; its CRCs do not"
    assert not fixed_names.copies_whole([tmp_path / "old.pt"], 20), "a copy of another version than offered"


def keras_archive(path: Path, written: float) -> Path:
    """A `.keras` file as Keras 3 writes it: a zip of its config, metadata and weights, no step inside."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", '{"keras_version": "3.15.1"}')
        archive.writestr("config.json", '{"class_name": "Sequential"}')
        archive.writestr("model.weights.h5", b"\x89HDF\r\n\x1a\n" + bytes(64))
    os.utime(path, (written, written))
    return path


def test_a_keras_model_saved_over_itself_goes_by_the_time_it_was_written(tmp_path: Path) -> None:
    keras_archive(tmp_path / "model.keras", SETTLED)
    newest = layouts.newest_complete(tmp_path)
    assert newest is not None and (newest.path.name, newest.layout) == ("model.keras", "fixed")
    assert is_version(newest.step) and newest.step == int(SETTLED)
    assert step_text(newest.step).startswith("version ") and step_text(newest.step).endswith("(step unknown)")
    keras_archive(tmp_path / "model.keras", SETTLED + 30)  # the next epoch's save
    assert layouts.newest_complete(tmp_path).step == int(SETTLED) + 30  # type: ignore[union-attr]


def test_an_entry_the_job_names_is_its_checkpoint_whatever_its_name_reads(tmp_path: Path) -> None:
    save(tmp_path / "ckpt2.pt")  # no step inside: the catch-all reads step 2 from its name
    assert layouts.classify(tmp_path / "ckpt2.pt") == layouts.Classified(layouts.Layout.GENERIC, 2)
    fixed_names.name_entries(["ckpt2.pt"])
    try:
        kind = layouts.classify(tmp_path / "ckpt2.pt")
        assert kind is not None and kind.layout == layouts.Layout.FIXED and is_version(kind.step)
        assert layouts.classify(tmp_path / "ckpt2.pt", in_series=False) is None, "only in the checkpoint folder"
    finally:
        fixed_names.name_entries([])
    assert layouts.classify(tmp_path / "ckpt2.pt") == layouts.Classified(layouts.Layout.GENERIC, 2)


def test_a_step_is_never_shown_as_a_version_or_the_other_way() -> None:
    assert step_text(250) == "step 250"
    assert step_text(1_764_870_612) == "version 2025-12-04T17:50:12Z (step unknown)"
    assert not is_version(None) and not is_version(999_999_999)


def test_another_layout_s_checkpoint_beside_it_is_not_part_of_the_set(tmp_path: Path) -> None:
    save(tmp_path / "ckpt.pt", iter_num=300)
    (tmp_path / "checkpoint-200").mkdir()
    (tmp_path / "checkpoint-200" / "trainer_state.json").write_text('{"global_step": 200}')
    save(tmp_path / "model_step100.pt", step=100)
    entries = layouts.fixed_entries(tmp_path / "ckpt.pt")
    assert [entry.name for entry in entries or []] == ["ckpt.pt"]


def test_a_torn_ckpt_pt_a_dead_writer_left_is_moved_out_of_the_script_s_way(tmp_path: Path) -> None:
    """A script that resumes when ckpt.pt exists would load a torn one and fail on every start."""
    whole = save(tmp_path / "ckpt.pt", iter_num=40).read_bytes()
    (tmp_path / "ckpt.pt").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "notes.txt").write_text("kept")
    assert layouts.prepare_for_resume(tmp_path, None) == ["ckpt.pt"]
    assert not (tmp_path / "ckpt.pt").exists() and (tmp_path / ".incomplete-ckpt.pt").exists()
    assert (tmp_path / "notes.txt").exists()


def test_a_notification_names_a_version_as_a_version() -> None:
    _, text = message_for("keras", EventKind.RESUME, {"instance": "i-1", "step": 1_764_870_612}) or ("", "")
    assert text == "Job keras resumed on i-1 from checkpoint version 2025-12-04T17:50:12Z (step unknown)."
    _, text = message_for("nano", EventKind.RESUME, {"instance": "i-1", "step": 250}) or ("", "")
    assert text == "Job nano resumed on i-1 from checkpoint step 250."
