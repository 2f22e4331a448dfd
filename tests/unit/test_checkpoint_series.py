"""Checkpoints recognised by their shape: names that differ only in one rising integer, each written a
while after the one before. Numbered files written all at once are not checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

from spot_trainer.storage.saves import layouts
from spot_trainer.storage.saves.final_outputs import final_output_files

EPOCH_SECONDS = 90.0


def saved(folder: Path, names: list[str], *, apart: float) -> list[Path]:
    """Entries written `apart` seconds after one another, in the order given."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, name in enumerate(names):
        path = folder / name
        if name.endswith("/"):
            path = folder / name.rstrip("/")
            path.mkdir()
            (path / "weights.bin").write_bytes(b"w")
        else:
            path.write_bytes(b"w")
        written = 1_700_000_000 + index * apart
        os.utime(path, (written, written))
        paths.append(path)
    os.utime(folder, None)  # a new listing, as an added entry makes
    return paths


def test_a_model_per_epoch_is_a_series_uploaded_once_the_next_epoch_is_saved(tmp_path: Path) -> None:
    saved(tmp_path, [f"model_{epoch}.pth" for epoch in range(1, 4)], apart=EPOCH_SECONDS)
    newest = layouts.newest_complete(tmp_path)
    assert newest is not None and (newest.step, newest.path.name, newest.layout) == (2, "model_2.pth", "series")
    assert layouts.newest_complete(tmp_path, writer_done=True).step == 3  # type: ignore[union-attr]
    assert final_output_files(tmp_path) == {}, "checkpoints are not final outputs"


def test_epoch_folders_and_keras_names_with_their_loss_are_series(tmp_path: Path) -> None:
    saved(tmp_path / "dirs", ["epoch_0/", "epoch_1/", "epoch_2/"], apart=EPOCH_SECONDS)
    assert layouts.newest_complete(tmp_path / "dirs", writer_done=True).path.name == "epoch_2"  # type: ignore[union-attr]
    keras = ["weights.01-0.93.hdf5", "weights.02-0.71.hdf5", "weights.03-0.64.hdf5"]
    saved(tmp_path / "keras", keras, apart=EPOCH_SECONDS)
    newest = layouts.newest_complete(tmp_path / "keras", writer_done=True)
    assert newest is not None and (newest.step, newest.path.name) == (3, "weights.03-0.64.hdf5")


def test_saves_a_second_apart_are_a_series_though_the_file_times_read_a_tick_less(tmp_path: Path) -> None:
    saved(tmp_path, [f"model_{epoch}.pth" for epoch in range(1, 4)], apart=0.996)  # 1 s apart, coarse clock
    assert layouts.newest_complete(tmp_path, writer_done=True).step == 3  # type: ignore[union-attr]


def test_numbered_files_written_at_once_are_not_checkpoints(tmp_path: Path) -> None:
    saved(tmp_path, [f"shard_{index:04d}.bin" for index in range(4)], apart=0.01)
    saved(tmp_path / "export", [f"part-{index:05d}.parquet" for index in range(1, 4)], apart=0.0)
    assert layouts.newest_complete(tmp_path, writer_done=True) is None
    assert layouts.newest_complete(tmp_path / "export", writer_done=True) is None
    assert sorted(final_output_files(tmp_path)) == ["export/part-00001.parquet", "export/part-00002.parquet",
                                                    "export/part-00003.parquet", "shard_0000.bin",
                                                    "shard_0001.bin", "shard_0002.bin", "shard_0003.bin"]


def test_one_numbered_file_alone_or_numbers_written_backwards_are_no_series(tmp_path: Path) -> None:
    saved(tmp_path / "one", ["model_7.pth"], apart=EPOCH_SECONDS)
    assert layouts.newest_complete(tmp_path / "one", writer_done=True) is None
    saved(tmp_path / "backwards", ["model_3.pth", "model_2.pth", "model_1.pth"], apart=EPOCH_SECONDS)
    assert layouts.newest_complete(tmp_path / "backwards", writer_done=True) is None


def test_a_name_of_another_layout_keeps_its_layout(tmp_path: Path) -> None:
    saved(tmp_path, ["checkpoint-10/", "checkpoint-20/"], apart=EPOCH_SECONDS)
    (tmp_path / "checkpoint-20" / "trainer_state.json").write_text('{"global_step": 20}')
    newest = layouts.newest_complete(tmp_path)
    assert newest is not None and (newest.step, newest.layout) == (20, "hf")


def test_numbered_runs_in_a_folder_below_the_checkpoint_folder_stay_outputs(tmp_path: Path) -> None:
    saved(tmp_path / "lightning_logs", ["version_0/", "version_1/"], apart=EPOCH_SECONDS)
    assert sorted(final_output_files(tmp_path)) == ["lightning_logs/version_0/weights.bin",
                                                    "lightning_logs/version_1/weights.bin"]


def test_a_sharded_model_and_numbered_metrics_beside_checkpoints_are_outputs(tmp_path: Path) -> None:
    """HF's sharded weights of one save are written one after another; metrics files are no weights."""
    shards = [f"model-{index:05d}-of-00003.safetensors" for index in range(1, 4)]
    saved(tmp_path, [*shards, "eval_750.json", "eval_1000.json", "eval_1250.json"], apart=EPOCH_SECONDS)
    assert layouts.newest_complete(tmp_path, writer_done=True) is None
    assert sorted(final_output_files(tmp_path)) == sorted([*shards, "eval_1000.json", "eval_1250.json",
                                                           "eval_750.json"])
