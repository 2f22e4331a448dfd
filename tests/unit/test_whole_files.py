"""A single checkpoint file goes up as soon as its own format proves it whole, whatever its name; a file still
being written, cut short, with a damaged directory or a lying header never does."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from spot_trainer.storage.files import whole_files
from spot_trainer.storage.files.whole_files import Format
from spot_trainer.storage.saves import layouts, upload_rules


def torch_checkpoint(path: Path, step: int, *, age: float = 0.0) -> Path:
    """What a plain script writes: torch.save of its model, optimizer and step, straight under its final name."""
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.save({"model": model.state_dict(), "opt": optimizer.state_dict(), "step": step}, path)
    written = time.time() - age
    os.utime(path, (written, written))
    return path


def settled(path: Path) -> Path:
    written = time.time() - whole_files.SETTLE_SECONDS - 1
    os.utime(path, (written, written))
    return path


def test_a_torch_archive_proves_it_is_whole_and_loads(tmp_path: Path) -> None:
    path = torch_checkpoint(tmp_path / "checkpoint_40.pt", 40)
    assert whole_files.format_of(path) is Format.ZIP
    assert whole_files.proof(path) is True
    assert torch.load(path, weights_only=True)["step"] == 40


def test_a_torch_archive_still_being_written_is_not_whole_at_any_point(tmp_path: Path) -> None:
    whole = torch_checkpoint(tmp_path / "whole.pt", 1).read_bytes()
    partial = tmp_path / "checkpoint_40.pt"
    for cut in range(4, len(whole), max(1, len(whole) // 97)):  # every prefix a writer leaves on disk
        partial.write_bytes(whole[:cut])
        assert whole_files.proof(partial) is False, cut


def test_a_zip_whose_central_directory_is_damaged_or_whose_members_do_not_fit_is_not_whole(tmp_path: Path) -> None:
    whole = torch_checkpoint(tmp_path / "whole.pt", 1).read_bytes()
    directory = whole.rfind(b"PK\x01\x02")  # the last central-directory entry
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(whole[:directory] + b"XX\x01\x02" + whole[directory + 4:])
    assert whole_files.proof(damaged) is False
    first_data = whole.find(b"PK\x03\x04", 4)  # a member's bytes lost from the middle of the archive
    shrunk = tmp_path / "shrunk.pt"
    shrunk.write_bytes(whole[:first_data - 64] + whole[first_data:])
    assert whole_files.proof(shrunk) is False


def test_a_safetensors_file_is_whole_only_when_its_header_matches_its_size(tmp_path: Path) -> None:
    path = tmp_path / "model_step_40.safetensors"
    save_file({"w": torch.arange(64.0), "b": torch.zeros(3)}, path)
    assert (whole_files.format_of(path), whole_files.proof(path)) == (Format.SAFETENSORS, True)
    data = path.read_bytes()
    path.write_bytes(data[:-4])  # cut short
    assert whole_files.proof(path) is False
    header_length = struct.unpack("<Q", data[:8])[0]
    lying = json.loads(data[8:8 + header_length])
    lying["w"]["data_offsets"][1] += 64  # a header that promises more of a tensor than the file holds
    header = json.dumps(lying).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data[8 + header_length:])
    assert whole_files.proof(path) is False


def test_an_hdf5_file_is_whole_when_its_superblock_end_matches_its_size(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "weights.12-0.53.hdf5"
    with h5py.File(path, "w") as file:
        file.create_dataset("kernel", data=torch.arange(1000.0).numpy())
    assert (whole_files.format_of(path), whole_files.proof(path)) == (Format.HDF5, True)
    path.write_bytes(path.read_bytes()[:-100])
    assert whole_files.proof(path) is False


def test_a_legacy_pickle_cannot_prove_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint_40.pt"
    torch.save({"step": 40}, path, _use_new_zipfile_serialization=False)
    assert whole_files.proof(path) is None


def test_a_whole_step_file_goes_up_once_still_without_waiting_for_a_higher_step(tmp_path: Path) -> None:
    older = settled(torch_checkpoint(tmp_path / "checkpoint_20.pt", 20))
    newest = torch_checkpoint(tmp_path / "checkpoint_40.pt", 40)
    assert layouts.newest_complete(tmp_path).path == older  # just written: the writer may reopen it
    settled(newest)
    assert layouts.newest_complete(tmp_path).path == newest


def test_a_series_member_that_proves_it_is_whole_goes_up_once_still(tmp_path: Path) -> None:
    for epoch in (1, 2):
        written = time.time() - 10 + epoch * 3
        path = torch_checkpoint(tmp_path / f"model_{epoch}.pth", epoch)
        os.utime(path, (written, written))
    assert layouts.newest_complete(tmp_path) == layouts.Checkpoint(2, tmp_path / "model_2.pth", layouts.Layout.SERIES)


def test_a_step_file_rewritten_in_place_is_checked_again(tmp_path: Path) -> None:
    path = settled(torch_checkpoint(tmp_path / "checkpoint_40.pt", 40))
    assert layouts.newest_complete(tmp_path) is not None
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # the script saves step 40 again, over the same name
    assert layouts.newest_complete(tmp_path) is None
    path.write_bytes(whole)
    settled(path)
    assert layouts.newest_complete(tmp_path).path == path


def test_a_cut_short_archive_never_goes_up_even_once_a_higher_step_appears(tmp_path: Path) -> None:
    cut = settled(torch_checkpoint(tmp_path / "checkpoint_40.pt", 40))
    cut.write_bytes(cut.read_bytes()[:-30])
    settled(cut)
    settled(torch_checkpoint(tmp_path / "checkpoint_60.pt", 60))
    assert layouts.complete_below(tmp_path, 60) == []
    assert layouts.newest_complete(tmp_path, writer_done=True).step == 60
    assert layouts.prepare_for_resume(tmp_path, None) == ["checkpoint_40.pt"]


def test_a_legacy_pickle_keeps_the_higher_step_rule(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint_40.pt"
    torch.save({"step": 40}, path, _use_new_zipfile_serialization=False)
    settled(path)
    assert layouts.newest_complete(tmp_path) is None
    assert layouts.newest_complete(tmp_path, writer_done=True).path == path


@pytest.mark.parametrize(("name", "legacy", "said"), [
    ("checkpoint_40.pt", False, "checkpoint_40.pt: a torch archive, uploaded once whole and still 2 s"),
    ("model_step40.bin", True, "model_step40.bin: uploaded once a higher step appears or the command exits"),
])
def test_the_rule_for_each_name_is_said_in_one_line(tmp_path: Path, name: str, legacy: bool, said: str) -> None:
    path = tmp_path / name
    torch.save({"w": torch.ones(64)}, path, _use_new_zipfile_serialization=not legacy)
    line = upload_rules.rule_line(layouts.newest_entry(tmp_path))
    assert line is not None and line.startswith(said)
    assert upload_rules.rule_key(line) == upload_rules.rule_key(line.replace("40", "60"))
