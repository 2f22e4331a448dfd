"""The step a checkpoint file states about itself: a torch archive's top-level entry, a safetensors header's
metadata, a JSON state file's entry. Read without unpickling: nothing in the file runs."""

from __future__ import annotations

import collections
import json
import os
import struct
from pathlib import Path

import torch

from spot_trainer.storage.saves.stated_step import step_in


def _model_state() -> dict[str, object]:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict()}


def _saved(path: Path, obj: object) -> Path:
    torch.save(obj, path)
    return path


def test_a_top_level_step_is_read_after_the_model_s_state(tmp_path: Path) -> None:
    nano = {**_model_state(), "model_args": {"n_layer": 2}, "iter_num": 250, "best_val_loss": torch.tensor(1.5),
            "config": {"iter_num": 7}}
    assert step_in(_saved(tmp_path / "ckpt.pt", nano)) == 250
    imagenet = {"epoch": 12, "arch": "resnet18", "state_dict": _model_state()["model"], "best_acc1": torch.tensor(3.0)}
    assert step_in(_saved(tmp_path / "checkpoint.pth.tar", imagenet)) == 12


def test_the_most_specific_key_wins_and_an_ordered_dict_counts(tmp_path: Path) -> None:
    assert step_in(_saved(tmp_path / "a.pt", {"epoch": 4, "global_step": 400})) == 400
    assert step_in(_saved(tmp_path / "b.pt", collections.OrderedDict(step=77, weight=torch.zeros(2)))) == 77


def test_nested_absent_or_not_a_whole_number_states_no_step(tmp_path: Path) -> None:
    cases = {
        "nested.pt": {**_model_state(), "meta": {"step": 9}},
        "absent.pt": _model_state()["model"],
        "tensor.pt": {"step": torch.tensor(5)},
        "float.pt": {"epoch": 3.0},
        "bool.pt": {"step": True},
        "negative.pt": {"step": -1},
        "string.pt": {"step": "5"},
        "list.pt": [("step", 5)],
    }
    for name, obj in cases.items():
        assert step_in(_saved(tmp_path / name, obj)) is None, name


class _Runs:
    """Unpickled, it would run a command: reading the step must never do so."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def test_nothing_in_the_file_runs_while_its_step_is_read(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    torch.save({"step": 31, "extra": _Runs(marker)}, tmp_path / "odd.pt")
    assert step_in(tmp_path / "odd.pt") == 31
    assert not marker.exists()


def test_a_torn_or_legacy_archive_states_no_step(tmp_path: Path) -> None:
    whole = _saved(tmp_path / "ckpt.pt", {**_model_state(), "iter_num": 8}).read_bytes()
    (tmp_path / "cut.pt").write_bytes(whole[: len(whole) // 2])
    torch.save({"iter_num": 8}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert step_in(tmp_path / "cut.pt") is None
    assert step_in(tmp_path / "legacy.pt") is None
    assert step_in(tmp_path / "missing.pt") is None


def test_a_rewrite_in_place_is_read_again(tmp_path: Path) -> None:
    path = _saved(tmp_path / "ckpt.pt", {"iter_num": 10})
    assert step_in(path) == 10
    torch.save({"iter_num": 20, "pad": torch.zeros(8)}, path)
    assert step_in(path) == 20


def _safetensors(path: Path, metadata: dict[str, str] | None) -> Path:
    header: dict[str, object] = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    if metadata is not None:
        header["__metadata__"] = metadata
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(8))
    return path


def test_safetensors_metadata_and_a_json_state_file(tmp_path: Path) -> None:
    assert step_in(_safetensors(tmp_path / "a.safetensors", {"step": "1200", "format": "pt"})) == 1200
    assert step_in(_safetensors(tmp_path / "b.safetensors", {"format": "pt"})) is None
    assert step_in(_safetensors(tmp_path / "c.safetensors", None)) is None
    (tmp_path / "state.json").write_text(json.dumps({"epoch": 6, "lr": 0.1}))
    (tmp_path / "nested.json").write_text(json.dumps({"state": {"epoch": 6}}))
    (tmp_path / "broken.json").write_text('{"epoch": 6')
    assert step_in(tmp_path / "state.json") == 6
    assert step_in(tmp_path / "nested.json") is None
    assert step_in(tmp_path / "broken.json") is None
