"""The private view an upload reads: the same bytes as the checkpoint, kept when the original is pruned."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from spot_trainer.storage.files import staging
from spot_trainer.storage.saves import layouts


def hf_checkpoint(root: Path, step: int) -> Path:
    path = root / f"checkpoint-{step}"
    (path / "optimizer").mkdir(parents=True)
    (path / "model.safetensors").write_bytes(os.urandom(4096))
    (path / "optimizer" / "state.pt").write_bytes(os.urandom(1024))
    (path / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    return path


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_staged_tree_outlives_the_pruned_original_and_keeps_its_name(tmp_path: Path) -> None:
    original = hf_checkpoint(tmp_path, 40)
    expected = tree(original)
    staged = staging.stage(original)
    assert staged is not None and staged.name == original.name  # the manifest records this name
    shutil.rmtree(original)  # the trainer's rotation
    assert tree(staged) == expected
    staging.release(staged)
    assert list(tmp_path.iterdir()) == []


def test_a_staged_file_is_a_hard_link_not_a_copy(tmp_path: Path) -> None:
    original = tmp_path / "epoch=0-step=7.ckpt"
    original.write_bytes(b"x" * 10_000)
    staged = staging.stage(original)
    assert staged is not None and staged.stat().st_ino == original.stat().st_ino


def test_staged_views_are_invisible_to_the_layouts(tmp_path: Path) -> None:
    staged = staging.stage(hf_checkpoint(tmp_path, 5))
    assert staged is not None
    shutil.rmtree(tmp_path / "checkpoint-5")
    assert layouts.newest_complete(tmp_path, writer_done=True) is None
    assert layouts.prepare_for_resume(tmp_path, None) == []


def test_a_checkpoint_pruned_before_it_was_staged_fails_that_upload_only(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        staging.stage(tmp_path / "checkpoint-9")
    assert list(tmp_path.iterdir()) == []


def test_without_hard_links_the_original_is_uploaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(staging.os, "link", no_links)
    assert staging.stage(hf_checkpoint(tmp_path, 3)) is None
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-3"]


def test_leftovers_of_an_agent_killed_mid_upload_are_removed(tmp_path: Path) -> None:
    staged = staging.stage(hf_checkpoint(tmp_path, 12))
    assert staged is not None
    assert staging.remove_leftovers(tmp_path) == [".upload-checkpoint-12"]
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-12"]
