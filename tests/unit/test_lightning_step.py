"""The step of a Lightning checkpoint whose name carries none, read from the archive torch.save wrote
(never unpickled), so `filename="{epoch}-{val_loss:.2f}"` or "best" checkpoints are recognised."""

from __future__ import annotations

import os
import struct
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from spot_trainer.storage.saves import layouts
from spot_trainer.storage.saves.lightning_step import archive_step


def odd_compression(path: Path) -> None:
    """Mark every member as stored with a compression method zipfile does not know (it raises NotImplementedError)."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = data.find(signature)
        while at != -1:
            struct.pack_into("<H", data, at + offset, 99)
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))


def lightning_checkpoint(path: Path, step: int) -> Path:
    """The dict Lightning's dump_checkpoint builds, in its order: epoch and global_step first."""
    torch.save({"epoch": 3, "global_step": step, "pytorch-lightning_version": "2.6.6",
                "state_dict": OrderedDict(weight=torch.ones(4)), "loops": {"fit_loop": {"global_step": 0}},
                "optimizer_states": [], "lr_schedulers": []}, path)
    return path


@pytest.mark.parametrize("step", [0, 7, 255, 256, 65_535, 65_536, 2**31 + 5])
def test_the_step_is_read_from_the_archive_whatever_its_size(tmp_path: Path, step: int) -> None:
    assert archive_step(lightning_checkpoint(tmp_path / "best.ckpt", step)) == step


def test_a_checkpoint_named_its_own_way_is_a_lightning_checkpoint_of_its_step(tmp_path: Path) -> None:
    named = lightning_checkpoint(tmp_path / "epoch=3-val_loss=0.52.ckpt", 1024)
    lightning_checkpoint(tmp_path / "last.ckpt", 1024)  # save_last's copy of the newest
    assert layouts.classify(named) == layouts.Classified(layouts.Layout.LIGHTNING, 1024)
    assert layouts.newest_complete(tmp_path) == layouts.Checkpoint(1024, named, layouts.Layout.LIGHTNING)


def test_with_a_monitored_top_k_last_ckpt_holds_the_newest_step_and_is_the_checkpoint(tmp_path: Path) -> None:
    # ModelCheckpoint(monitor="val_loss", save_top_k=2, save_last=True): the best two are older steps.
    lightning_checkpoint(tmp_path / "epoch=2-step=300.ckpt", 300)
    lightning_checkpoint(tmp_path / "epoch=5-step=600.ckpt", 600)
    last = lightning_checkpoint(tmp_path / "last.ckpt", 1000)
    assert layouts.newest_complete(tmp_path) == layouts.Checkpoint(1000, last, layouts.Layout.LIGHTNING)
    assert layouts.prepare_for_resume(tmp_path, last) == []  # restored as last.ckpt: it is its own last
    assert layouts.newest_complete(tmp_path, writer_done=True).path == last
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith(".")]


def test_a_name_with_the_step_still_wins_over_the_content(tmp_path: Path) -> None:
    named = lightning_checkpoint(tmp_path / "epoch=0-step=30.ckpt", 99)
    assert layouts.classify(named) == layouts.Classified(layouts.Layout.LIGHTNING, 30)


def test_what_is_no_whole_lightning_checkpoint_has_no_step(tmp_path: Path) -> None:
    whole = lightning_checkpoint(tmp_path / "whole.ckpt", 500).read_bytes()
    (tmp_path / "cut.ckpt").write_bytes(whole[: len(whole) // 2])  # a writer killed halfway
    torch.save({"model": torch.ones(2), "step": 500}, tmp_path / "plain.ckpt")  # torch.save of one's own dict
    (tmp_path / "text.ckpt").write_text("global_step 500")
    torch.save({"global_step": "500"}, tmp_path / "string.ckpt")
    # A global_step that is not Lightning's: nested first (in hyperparameters), or not after the epoch.
    torch.save({"hparams": {"global_step": 1}, "global_step": 999}, tmp_path / "nested.ckpt")
    torch.save({"global_step": 5, "epoch": 1}, tmp_path / "reversed.ckpt")
    odd_compression(lightning_checkpoint(tmp_path / "odd.ckpt", 500))
    for name in ("cut.ckpt", "plain.ckpt", "text.ckpt", "string.ckpt", "nested.ckpt", "reversed.ckpt", "odd.ckpt"):
        assert archive_step(tmp_path / name) is None, name
    for name in ("cut.ckpt", "text.ckpt", "string.ckpt", "odd.ckpt"):
        assert layouts.classify(tmp_path / name) is None, name
    # One's own dict under one name is a fixed-name checkpoint at the step it holds at its top level.
    assert layouts.classify(tmp_path / "plain.ckpt") == layouts.Classified(layouts.Layout.FIXED, 500)
    assert layouts.classify(tmp_path / "nested.ckpt") == layouts.Classified(layouts.Layout.FIXED, 999)
    assert layouts.classify(tmp_path / "reversed.ckpt") == layouts.Classified(layouts.Layout.FIXED, 5)
    assert archive_step(tmp_path / "gone.ckpt") is None


def test_a_file_written_again_in_place_is_read_again(tmp_path: Path) -> None:
    best = lightning_checkpoint(tmp_path / "best.ckpt", 100)
    assert archive_step(best) == 100
    lightning_checkpoint(tmp_path / "best.tmp", 200)
    os.replace(tmp_path / "best.tmp", best)  # ModelCheckpoint's save_top_k=1 "best" is replaced each time
    assert archive_step(best) == 200
