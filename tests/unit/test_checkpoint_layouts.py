"""Which entries of CHECKPOINT_DIR the agent uploads: every layout, complete or still being written."""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import save_file

from spot_trainer.agent.watches.save_watch import SaveWatch
from spot_trainer.storage.files.local import write_checkpoint
from spot_trainer.storage.saves import layouts, library_saves, shards


def hf_checkpoint(root: Path, step: int, *, state: str | None = None) -> Path:
    """An HF Trainer checkpoint as transformers writes it: weights first, trainer_state.json last."""
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(os.urandom(256))
    (path / "optimizer.pt").write_bytes(os.urandom(256))
    if state is not None:
        (path / layouts.HF_STATE_FILE).write_text(state)
    return path


def lightning_checkpoint(root: Path, step: int) -> Path:
    path = root / f"epoch=0-step={step}.ckpt"
    torch.save({"global_step": step, "state_dict": {"w": torch.ones(4)}}, path)
    return path


@pytest.mark.parametrize(("name", "expected"), [
    ("step-00000120", ("ours", 120)),
    ("checkpoint-500", ("generic", 500)),  # a file: HF checkpoints are directories
    ("epoch=3-step=1200.ckpt", ("lightning", 1200)),
    ("step=40.ckpt", ("lightning", 40)),
    ("last.ckpt", None),
    ("last-v1.ckpt", None),
    ("model_step300.pt", ("generic", 300)),
    ("iter-0042", ("generic", 42)),
    (".tmp-step-5-abcd", None),
    (".checkpoint-7", None),
    ("events.out.tfevents.1700000000", None),
    ("config.json", None),
])
def test_names_map_to_layouts(tmp_path: Path, name: str, expected: tuple[str, int] | None) -> None:
    (tmp_path / name).write_bytes(b"x")
    assert layouts.classify(tmp_path / name) == (layouts.Classified(*expected) if expected else None)


def test_hf_checkpoint_counts_only_once_trainer_state_names_its_step(tmp_path: Path) -> None:
    hf_checkpoint(tmp_path, 100, state=json.dumps({"global_step": 100}))
    hf_checkpoint(tmp_path, 200)  # weights written, trainer_state.json not yet
    assert layouts.newest_complete(tmp_path).path.name == "checkpoint-100"
    (tmp_path / "checkpoint-200" / layouts.HF_STATE_FILE).write_text('{"global_st')  # mid-write
    assert layouts.newest_complete(tmp_path).path.name == "checkpoint-100"
    (tmp_path / "checkpoint-200" / layouts.HF_STATE_FILE).write_text(json.dumps({"global_step": 200}))
    newest = layouts.newest_complete(tmp_path)
    assert (newest.step, newest.layout, newest.path.name) == (200, "hf", "checkpoint-200")


def test_hf_checkpoint_even_after_the_command_exits_needs_its_state(tmp_path: Path) -> None:
    hf_checkpoint(tmp_path, 300)  # killed before trainer_state.json: never complete
    assert layouts.newest_complete(tmp_path, writer_done=True) is None


def test_lightning_checkpoint_counts_once_its_archive_is_whole(tmp_path: Path) -> None:
    whole = lightning_checkpoint(tmp_path, 100)
    cut = lightning_checkpoint(tmp_path, 200)
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])  # a copy across filesystems, cut off
    (tmp_path / "last.ckpt").write_bytes(whole.read_bytes())
    newest = layouts.newest_complete(tmp_path, writer_done=True)
    assert (newest.step, newest.layout, newest.path) == (100, "lightning", whole)


def test_generic_checkpoint_counts_once_superseded_or_the_writer_is_done(tmp_path: Path) -> None:
    (tmp_path / "model_step100.pt").write_bytes(b"a")
    assert layouts.newest_complete(tmp_path) is None  # may still be written
    assert layouts.newest_complete(tmp_path, writer_done=True).step == 100
    (tmp_path / "model_step200.pt").write_bytes(b"b")
    assert layouts.newest_complete(tmp_path).step == 100


def accelerate_checkpoint(root: Path, name: str, *, ranks: int = 1, age: float = 5.0) -> Path:
    """What Accelerator.save_state writes: weights and optimizer first, each rank's RNG state after them;
    `age`: seconds since the last write."""
    path = root / name
    path.mkdir(parents=True)
    save_file({"w": torch.arange(64.0)}, path / "model.safetensors")
    torch.save({"state": {}}, path / "optimizer.bin")
    for rank in range(ranks):
        torch.save({"random_state": [1, 2, 3]}, path / f"random_states_{rank}.pkl")
    written = time.time() - age
    for entry in path.iterdir():
        os.utime(entry, (written, written))
    return path


def test_an_accelerate_checkpoint_counts_once_every_rank_state_is_whole_and_it_has_settled(tmp_path: Path) -> None:
    accelerate_checkpoint(tmp_path, "checkpoint-100")
    newest = accelerate_checkpoint(tmp_path, "checkpoint-200", ranks=2, age=0.0)  # just written
    assert layouts.newest_complete(tmp_path).step == 100  # a registered custom object may follow at once
    settled = time.time() - library_saves.SETTLE_SECONDS - 1
    for entry in newest.iterdir():
        os.utime(entry, (settled, settled))
    assert layouts.newest_complete(tmp_path).path == newest
    rank_1 = newest / "random_states_1.pkl"
    rank_1.write_bytes(rank_1.read_bytes()[:40])  # one rank still writing
    os.utime(rank_1, (settled, settled))
    assert layouts.newest_complete(tmp_path).step == 100


def test_an_accelerate_checkpoint_needs_rank_0_and_every_file_whole_even_once_superseded(tmp_path: Path) -> None:
    restored = accelerate_checkpoint(tmp_path, "checkpoint-100")
    # Rank 1 wrote its RNG state at once while rank 0 was still in diffusers' pre-save hook (unet/).
    early = tmp_path / "checkpoint-200"
    (early / "unet").mkdir(parents=True)
    torch.save({"random_state": [1]}, early / "random_states_1.pkl")
    # A writer killed in a registered custom object, written after the RNG state.
    custom = accelerate_checkpoint(tmp_path, "checkpoint-300")
    torch.save({"ema": torch.ones(8)}, custom / "custom_checkpoint_0.pkl")
    (custom / "custom_checkpoint_0.pkl").write_bytes((custom / "custom_checkpoint_0.pkl").read_bytes()[:100])
    cut = accelerate_checkpoint(tmp_path, "checkpoint-400")  # its weights cut short by a full disk
    (cut / "model.safetensors").write_bytes((cut / "model.safetensors").read_bytes()[:-16])
    assert layouts.newest_complete(tmp_path, writer_done=True).path == restored
    assert layouts.prepare_for_resume(tmp_path, restored) == ["checkpoint-200", "checkpoint-300", "checkpoint-400"]


def test_an_accelerate_checkpoint_is_not_taken_for_a_dead_hf_write(tmp_path: Path) -> None:
    restored = accelerate_checkpoint(tmp_path, "checkpoint-300")
    accelerate_checkpoint(tmp_path, "step_400", age=0.0)  # Accelerate's own examples name them so
    (tmp_path / "checkpoint-500").mkdir()  # killed before its RNG state: incomplete
    (tmp_path / "checkpoint-500" / "model.safetensors").write_bytes(b"x")
    assert layouts.prepare_for_resume(tmp_path, restored) == ["checkpoint-500"]
    assert layouts.newest_complete(tmp_path).path.name == "checkpoint-300"  # step_400 may still be written
    # At an instance's first start (the writer long gone), its content proves it, as no generic name can.
    assert layouts.newest_complete(tmp_path, writer_done=True, strict=True).path.name == "step_400"


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # one process saves alone, as meant
def test_a_distributed_checkpoint_counts_once_its_metadata_is_written_last(tmp_path: Path) -> None:
    # torch.distributed.checkpoint as FSDP and torchtitan save it, into step-<N>/ written in place.
    for step in (100, 200):
        dcp.save({"model": {"w": torch.arange(4.0)}}, checkpoint_id=tmp_path / f"step-{step}")
    assert layouts.newest_complete(tmp_path, strict=True).path.name == "step-200"  # its metadata proves it
    (tmp_path / "step-200" / library_saves.DCP_METADATA).unlink()  # the shards written, not yet the metadata
    assert layouts.newest_complete(tmp_path).path.name == "step-100"
    assert layouts.prepare_for_resume(tmp_path, tmp_path / "step-100") == ["step-200"]  # its writer died


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_a_distributed_checkpoint_missing_a_shard_its_metadata_lists_is_not_whole(tmp_path: Path) -> None:
    # A world spread over nodes: rank 0's disk holds the metadata, another node's disk that rank's shards.
    dcp.save({"model": {"w": torch.arange(4.0)}}, checkpoint_id=tmp_path / "step-100")
    (shard,) = (tmp_path / "step-100").glob("*.distcp")
    shard.unlink()
    assert layouts.newest_complete(tmp_path, writer_done=True) is None


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_a_distributed_checkpoint_with_a_shard_cut_short_is_not_whole(tmp_path: Path) -> None:
    # A disk that filled, a copy cut off: the shard is there but shorter than its .metadata's storage data.
    dcp.save({"model": {"w": torch.arange(64.0)}}, checkpoint_id=tmp_path / "step-100")
    dcp.save({"model": {"w": torch.arange(64.0)}}, checkpoint_id=tmp_path / "step-200")
    (shard,) = (tmp_path / "step-200").glob("*.distcp")
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    assert layouts.newest_complete(tmp_path, writer_done=True).path.name == "step-100"
    assert layouts.newest_complete(tmp_path, strict=True).path.name == "step-100"


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_an_hf_fsdp_checkpoint_whose_folder_lost_its_only_shard_is_not_whole(tmp_path: Path) -> None:
    # HF Trainer's FSDP save on one rank: pytorch_model_fsdp_0/ holds one shard and its .metadata. Without the
    # shard the folder is still DCP's (its .metadata lists the shard), and the checkpoint is not whole.
    for step in (10, 20):
        folder = hf_checkpoint(tmp_path, step, state=json.dumps({"global_step": step}))
        dcp.save({"model": {"w": torch.arange(8.0)}}, checkpoint_id=folder / "pytorch_model_fsdp_0")
    (shard,) = (tmp_path / "checkpoint-20" / "pytorch_model_fsdp_0").glob("*.distcp")
    shard.unlink()
    assert layouts.newest_complete(tmp_path, writer_done=True).path.name == "checkpoint-10"
    # Another tool's .metadata, listing no DCP shard, makes no folder DCP's.
    other = hf_checkpoint(tmp_path, 30, state=json.dumps({"global_step": 30}))
    (other / "runs").mkdir()
    (other / "runs" / library_saves.DCP_METADATA).write_text("{}")
    assert layouts.newest_complete(tmp_path, writer_done=True).path.name == "checkpoint-30"


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_a_sharded_lightning_checkpoint_folder_counts_once_lightning_wrote_its_meta_last(tmp_path: Path) -> None:
    # FSDPStrategy(state_dict_type="sharded") saves epoch=E-step=N.ckpt/ as a folder: DCP shards, then meta.pt.
    for step in (100, 200):
        folder = tmp_path / f"epoch=0-step={step}.ckpt"
        dcp.save({"model": {"w": torch.arange(4.0)}}, checkpoint_id=folder)
        if step == 100:
            torch.save({"epoch": 0, "global_step": step}, folder / layouts.LIGHTNING_SHARDED_META)
    newest = layouts.newest_complete(tmp_path, writer_done=True)
    assert (newest.step, newest.layout) == (100, "lightning")
    assert layouts.prepare_for_resume(tmp_path, newest.path) == ["epoch=0-step=200.ckpt"]


def test_our_directories_need_a_valid_marker_when_they_carry_one(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 10, {"w": torch.zeros(2)})
    damaged = write_checkpoint(tmp_path, 20, {"w": torch.zeros(2)})
    (damaged / "state.pt").write_bytes(b"short")
    (tmp_path / "step-00000015").write_bytes(b"a script's write-then-rename file")
    newest = layouts.newest_complete(tmp_path)
    assert (newest.step, newest.layout) == (15, "ours")


def test_a_restored_lightning_checkpoint_is_found_as_last(tmp_path: Path) -> None:
    older = lightning_checkpoint(tmp_path, 50)
    os.link(older, tmp_path / "last.ckpt")  # what the dead run's ModelCheckpoint left
    restored = lightning_checkpoint(tmp_path, 100)
    assert layouts.prepare_for_resume(tmp_path, restored) == []
    assert os.path.samefile(tmp_path / "last.ckpt", restored)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_other_restored_layouts_are_left_as_they_are(tmp_path: Path) -> None:
    restored = hf_checkpoint(tmp_path, 5, state=json.dumps({"global_step": 5}))
    assert layouts.prepare_for_resume(tmp_path, restored) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-5"]


def test_what_a_killed_writer_left_half_written_is_moved_aside_before_the_framework_looks(tmp_path: Path) -> None:
    restored = hf_checkpoint(tmp_path, 10, state=json.dumps({"global_step": 10}))
    hf_checkpoint(tmp_path, 20)  # killed before trainer_state.json: get_last_checkpoint would pick it
    lightning_checkpoint(tmp_path, 30).write_bytes(b"PK\x03\x04 cut short")
    (tmp_path / "last.ckpt").write_bytes(b"PK\x03\x04 cut short too")
    (tmp_path / "model_step40.pt").write_bytes(b"generic: the writer is gone, so it counts as whole")
    hidden = layouts.prepare_for_resume(tmp_path, restored)
    assert hidden == ["checkpoint-20", "epoch=0-step=30.ckpt", "last.ckpt"]
    visible = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert visible == ["checkpoint-10", "model_step40.pt"]
    assert (tmp_path / ".incomplete-checkpoint-20" / "model.safetensors").is_file()  # aside, not deleted
    hf_checkpoint(tmp_path, 20)  # the same name dies again: the older leftover makes way
    assert layouts.prepare_for_resume(tmp_path, None) == ["checkpoint-20"]


def test_a_command_that_saves_nothing_recognisable_is_named_once(tmp_path: Path) -> None:
    (tmp_path / "weights_final.bin").write_bytes(b"x")
    (tmp_path / "runs").mkdir()
    warnings: list[str] = []
    watch = SaveWatch(tmp_path, warn_after_seconds=3600, warn=warnings.append).start(resumed=False)
    watch.check(None)
    assert warnings == []  # still inside the save interval
    watch.check(None, exited=True)
    watch.check(None, exited=True)
    assert len(warnings) == 1
    assert "runs/, weights_final.bin (2 entries)" in warnings[0]
    assert "checkpoint-<N>/ (HF Trainer, Accelerate's save_state)" in warnings[0]


def test_a_command_past_its_save_interval_without_checkpoints_is_named(tmp_path: Path) -> None:
    warnings: list[str] = []
    watch = SaveWatch(tmp_path, warn_after_seconds=0.0, warn=warnings.append).start(resumed=False)
    watch.check(None)
    assert len(warnings) == 1 and "holds nothing" in warnings[0]


def test_a_command_that_saves_or_resumed_is_not_warned_about(tmp_path: Path) -> None:
    warnings: list[str] = []
    SaveWatch(tmp_path, 0.0, warnings.append).start(resumed=True).check(None, exited=True)
    watch = SaveWatch(tmp_path, 0.0, warnings.append).start(resumed=False)
    watch.check(object())
    watch.check(None, exited=True)
    assert warnings == []


def test_an_empty_step_entry_is_no_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "step-00000010").write_bytes(b"weights")
    (tmp_path / "step-00000020").write_bytes(b"")  # touched, never written
    (tmp_path / "step-00000030").mkdir()
    assert layouts.newest_complete(tmp_path, writer_done=True).step == 10


def test_strict_reading_counts_only_what_its_content_proves(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 10, {"w": torch.ones(2)})
    (tmp_path / "step-00000099").write_bytes(b"stray bytes")  # no marker: nothing vouches for it
    (tmp_path / "model_step200.pt").write_bytes(b"x")  # generic: complete only by convention
    assert layouts.newest_complete(tmp_path, writer_done=True).step == 200
    assert layouts.newest_complete(tmp_path, writer_done=True, strict=True).step == 10
    hf_checkpoint(tmp_path, 300, state=json.dumps({"global_step": 300}))
    assert layouts.newest_complete(tmp_path, writer_done=True, strict=True).step == 300


def test_everything_above_the_restore_point_is_set_aside_unverified(tmp_path: Path) -> None:
    restored = write_checkpoint(tmp_path, 10, {"w": torch.ones(2)})
    (tmp_path / "step-00000005").write_bytes(b"older")
    (tmp_path / "step-00000099").write_bytes(b"stray")
    (tmp_path / "model_step200.pt").write_bytes(b"x")
    assert layouts.set_aside_above(tmp_path, 10) == ["model_step200.pt", "step-00000099"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".unverified-model_step200.pt", ".unverified-step-00000099", "step-00000005", restored.name]
    assert layouts.newest_complete(tmp_path, writer_done=True).step == 10
    (tmp_path / "step-00000099").write_bytes(b"again")
    assert layouts.set_aside_above(tmp_path, None) == ["step-00000005", "step-00000010", "step-00000099"]
    assert (tmp_path / ".unverified-step-00000099").read_bytes() == b"again"


def test_a_fifo_where_a_layout_reads_a_file_never_blocks_the_poll(tmp_path: Path) -> None:
    checkpoint = hf_checkpoint(tmp_path, 20)
    os.mkfifo(checkpoint / layouts.HF_STATE_FILE)  # nobody will ever write to it
    os.mkfifo(tmp_path / "last.ckpt")
    found: list[object] = []
    looking = threading.Thread(target=lambda: found.append(layouts.newest_complete(tmp_path, writer_done=True)),
                               daemon=True)
    looking.start()
    looking.join(timeout=10)
    assert not looking.is_alive(), "the agent's poll blocked on a FIFO"
    assert found == [None]


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_a_metadata_that_could_not_be_read_once_is_read_again_at_the_next_poll(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A one-off EIO or ESTALE (a network file system), or too many open files: the save is judged again later.
    dcp.save({"model": {"w": torch.arange(4.0)}}, checkpoint_id=tmp_path / "step-100")
    failures = iter([OSError(errno.EIO, "Input/output error")])
    real = shards.open_regular

    def once_failing(path: Path) -> Any:
        if (error := next(failures, None)) is not None:
            raise error
        return real(path)

    monkeypatch.setattr(shards, "open_regular", once_failing)
    assert layouts.newest_complete(tmp_path, writer_done=True) is None
    assert layouts.newest_complete(tmp_path, writer_done=True).path.name == "step-100"
