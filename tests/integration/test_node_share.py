"""Each node of a round restores what its ranks read of a sharded step (moto, the agent's own code, one
folder per simulated node): at the world size that saved it, `.metadata`, what rank 0 writes alone, its
own ranks' shards whole and of the others only the pieces holding items stored whole; at another world
size, of a save whose chunks are not sized, all of it in one line saying why, and of chunks that are not
torch archives, each chunk read whole (test_resharded_reads.py: real FSDP2 saves); a round that starts again
from a step restored in part fetches all of it; a rank's read of what its node left out that S3 cannot answer
ends the load naming the file."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex

from spot_trainer.agent.several_nodes.restore import SeveralRestore
from spot_trainer.distributed.round_start import bring_to_step
from spot_trainer.integrations.missing_reads import fetch_missing
from spot_trainer.storage.saves import resharded, shards
from spot_trainer.storage.saves.shards import NodeRanks
from spot_trainer.storage.steps.checkpoint_restore import PART_RECORD, restored_in_part
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.steps.step_parts import StepParts
from tests.integration.test_multinode import job_store
from tests.support.dcp_metadata import fsdp_items, fsdp_metadata, llama_shapes

JOB = "share"
STEP = 40
WORLD = 4
WHOLE_ITEM = 300  # bytes of each rank's file holding an item stored whole (Adam's `step`, as DCP dedups it)
SHARD = 5000  # bytes of each rank's chunk of the one split item


def fsdp_save(root: Path, whole_items_on: range = range(WORLD)) -> list[Path]:
    """One FSDP-shaped DCP save of WORLD ranks, one node per rank: each file of `whole_items_on` holds an
    item stored whole, then its chunk of the split item; rank 0's node also holds `.metadata` and
    `trainer_state.json`."""
    folders, storage = [], {}
    for rank in range(WORLD):
        folder = root / f"node{rank}" / f"step-{STEP}"
        folder.mkdir(parents=True)
        whole = WHOLE_ITEM if rank in whole_items_on else 0
        (folder / f"__{rank}_0.distcp").write_bytes(bytes([rank + 1]) * whole + bytes([rank + 101]) * SHARD)
        if whole:
            storage[MetadataIndex(f"optimizer.state.{rank}.step")] = _StorageInfo(f"__{rank}_0.distcp", 0, whole)
        storage[MetadataIndex("model.weight", torch.Size([rank * 10, 0]))] = _StorageInfo(
            f"__{rank}_0.distcp", whole, SHARD)
        folders.append(folder)
    (folders[0] / "trainer_state.json").write_text(json.dumps({"global_step": STEP}))
    (folders[0] / ".metadata").write_bytes(pickle.dumps(Metadata(state_dict_metadata={}, storage_data=storage)))
    return folders


@pytest.fixture
def published(aws_env: dict[str, str], bucket: str, tmp_path: Path) -> tuple[RemoteStore, list[Path]]:
    return publish(aws_env, bucket, tmp_path, range(WORLD))


def publish(aws_env: dict[str, str], bucket: str, tmp_path: Path,
            whole_items_on: range) -> tuple[RemoteStore, list[Path]]:
    store = job_store(aws_env, bucket, JOB)
    folders = fsdp_save(tmp_path / "saved", whole_items_on)
    for rank, folder in enumerate(folders):
        StepParts(RemoteStore(store.s3, store.bucket, JOB, instance=f"i-{rank}", keep=store.keep)).upload(folder, STEP)
    assert store.latest_step() == STEP
    return store, folders


def test_each_node_restores_its_ranks_share_at_the_same_world_size(
        published: tuple[RemoteStore, list[Path]], tmp_path: Path) -> None:
    store, folders = published
    metadata = (folders[0] / ".metadata").stat().st_size
    for group_rank in range(WORLD):
        disk = tmp_path / f"fresh{group_rank}"
        restored = store.restore_at_or_below(disk, STEP, NodeRanks(group_rank=group_rank, nodes=WORLD, per_node=1))
        assert restored is not None and store.restored_step == STEP
        own = restored / f"__{group_rank}_0.distcp"
        assert own.read_bytes() == (folders[group_rank] / own.name).read_bytes()
        assert (restored / "trainer_state.json").read_text() == (folders[0] / "trainer_state.json").read_text()
        assert (restored / ".metadata").stat().st_size == metadata
        fetched = metadata + own.stat().st_size + (restored / "trainer_state.json").stat().st_size
        for rank in set(range(WORLD)) - {group_rank}:  # the item stored whole is there; the other rank's chunk is not
            body = (restored / f"__{rank}_0.distcp").read_bytes()
            assert body == bytes([rank + 1]) * WHOLE_ITEM + bytes(SHARD)
            fetched += WHOLE_ITEM
        saved = sum(path.stat().st_size for folder in folders for path in folder.iterdir())
        assert fetched < saved / 2, (fetched, saved)  # the node's own share, .metadata and rank 0's file
        record = restored_in_part(disk) or {}
        assert (record["step"], record["name"], record["ranks"], record["absent"]) == (
            STEP, f"step-{STEP}", [group_rank, WORLD, 1], [])
        assert sorted((key.rsplit("/", 1)[-1], ranges) for key, ranges in record["pieces"].items()) == [
            (f"__{rank}_0.distcp", [[0, WHOLE_ITEM]]) for rank in range(WORLD) if rank != group_rank]


def test_another_world_size_restores_all_of_a_save_whose_chunks_are_not_sized_in_one_line(
        published: tuple[RemoteStore, list[Path]], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, folders = published
    with caplog.at_level(logging.INFO):
        restored = store.restore_at_or_below(tmp_path / "fresh", STEP, NodeRanks(group_rank=0, nodes=3, per_node=1))
    assert restored is not None
    for rank in range(WORLD):
        name = f"__{rank}_0.distcp"
        assert (restored / name).read_bytes() == (folders[rank] / name).read_bytes()
    assert not (tmp_path / "fresh" / PART_RECORD).exists()
    lines = [r.getMessage() for r in caplog.records if "restoring all of step" in r.getMessage()]
    assert lines == [f"restoring all of step {STEP} for this node's ranks (0 to 0 of 3): .metadata: it was "
                     "saved by 4 rank(s), this round has 3, and its .metadata does not size every chunk it "
                     "places"], lines


def test_a_round_again_from_a_step_restored_in_part_fetches_all_of_it(
        published: tuple[RemoteStore, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, folders = published
    disk = tmp_path / "node2"
    ranks = NodeRanks(group_rank=2, nodes=WORLD, per_node=1)
    first = bring_to_step(disk, STEP, store, ranks)
    assert first is not None and restored_in_part(disk) is not None
    assert (first / "__0_0.distcp").read_bytes() != (folders[0] / "__0_0.distcp").read_bytes()
    again = bring_to_step(disk, STEP, store, ranks)  # the round before ended before a newer step: all of it
    assert again is not None and restored_in_part(disk) is None
    for rank in range(WORLD):
        name = f"__{rank}_0.distcp"
        assert (again / name).read_bytes() == (folders[rank] / name).read_bytes()
    assert "was restored in part for the round before" in capsys.readouterr().err


@pytest.mark.parametrize("builtin", [False, True])
def test_a_node_restoring_before_its_round_fetches_all_but_the_shards_which_the_round_brings(
        published: tuple[RemoteStore, list[Path]], tmp_path: Path, builtin: bool) -> None:
    """At boot (or between rounds) a node does not know its ranks yet: for the user's own command it fetches
    `.metadata` and rank 0's own files, and its round then fetches its share and links the rest. The
    built-in trainer, which agrees on a step by itself, gets all of it."""
    store, folders = published
    disk = tmp_path / "booted"
    restore = SeveralRestore(disk, store, telemetry=None, builtin=builtin)  # type: ignore[arg-type]
    booted = store.restore_checkpoint(disk, STEP, restore.before_a_round)
    assert booted is not None and booted.step == STEP
    shards = sorted(path.name for path in booted.path.iterdir() if path.name.endswith(".distcp"))
    if builtin:
        assert shards == [f"__{rank}_0.distcp" for rank in range(WORLD)] and restored_in_part(disk) is None
        return
    assert shards == [] and (booted.path / ".metadata").is_file()
    state = booted.path / "trainer_state.json"
    assert state.read_text() == (folders[0] / "trainer_state.json").read_text()
    ranks = NodeRanks(group_rank=1, nodes=WORLD, per_node=1)
    in_round = bring_to_step(disk, STEP, store, ranks)
    assert in_round is not None
    assert (in_round / "__1_0.distcp").read_bytes() == (folders[1] / "__1_0.distcp").read_bytes()
    assert (in_round / "trainer_state.json").stat().st_ino == state.stat().st_ino, "linked, not fetched again"
    assert (restored_in_part(disk) or {}).get("ranks") == [1, WORLD, 1]


def test_a_share_lacking_shards_only_other_ranks_read_is_what_the_round_resumes_from(
        aws_env: dict[str, str], bucket: str, tmp_path: Path) -> None:
    """DCP keeps an item stored whole in one rank's file: a node's share then lacks whole shard files (here
    ranks 2 and 3's), which `.metadata` lists. The round's own step stays in CHECKPOINT_DIR under its name:
    a script that resumes from the newest `step-<N>/.metadata` finds it."""
    store, folders = publish(aws_env, bucket, tmp_path, range(1))
    disk = tmp_path / "node1"
    in_round = bring_to_step(disk, STEP, store, NodeRanks(group_rank=1, nodes=WORLD, per_node=1))
    assert in_round == disk / f"step-{STEP}" and (in_round / ".metadata").is_file()
    assert sorted(path.name for path in in_round.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert (in_round / "__1_0.distcp").read_bytes() == (folders[1] / "__1_0.distcp").read_bytes()


def test_a_chunk_not_laid_out_as_a_torch_archive_is_fetched_whole_at_another_world_size(
        aws_env: dict[str, str], bucket: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Rows a node's rank does not use are left out only where the chunk's archive proves where they sit: here
    no chunk is a torch.save archive, so each chunk the node reads comes whole, as S3 holds it."""
    items = fsdp_items(llama_shapes(layers=1, dim=48, hidden=130, vocab=50))
    body, sizes = fsdp_metadata(items, WORLD)
    store = job_store(aws_env, bucket, JOB)
    folders = []
    for rank in range(WORLD):
        folder = tmp_path / "saved" / f"node{rank}" / f"step-{STEP}"
        folder.mkdir(parents=True)
        name = f"__{rank}_0.distcp"
        (folder / name).write_bytes(bytes(range(256)) * (sizes[name] // 256) + bytes(sizes[name] % 256))
        if rank == 0:
            (folder / ".metadata").write_bytes(body)
        StepParts(RemoteStore(store.s3, store.bucket, JOB, instance=f"i-{rank}", keep=store.keep)).upload(folder, STEP)
        folders.append(folder)
    assert store.latest_step() == STEP
    ranks = NodeRanks(group_rank=0, nodes=WORLD - 1, per_node=1)
    guessed = resharded.node_reads(body, set(sizes), ranks).narrowed
    assert guessed  # the rows it does not use would be left out, were the chunks archives
    with caplog.at_level(logging.INFO):
        restored = store.restore_at_or_below(tmp_path / "node0", STEP, ranks)
    assert restored is not None
    record = restored_in_part(tmp_path / "node0") or {}
    assert record["narrowed"] == {}
    for name, chunks in guessed.items():
        original = (folders[shards.rank_of(name) or 0] / name).read_bytes()
        with open(restored / name, "rb") as stream:
            for offset, length, *_ in chunks:
                stream.seek(offset)
                assert stream.read(length) == original[offset:offset + length]
    assert any("is not laid out as guessed: fetched whole" in r.getMessage() for r in caplog.records)


def test_a_read_of_what_a_node_left_out_that_s3_cannot_answer_ends_the_load_naming_the_file(
        aws_env: dict[str, str], bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    (tmp_path / f"step-{STEP}").mkdir()
    record = {"name": f"step-{STEP}", "bucket": bucket, "prefix": "gone/", "absent": ["__1_0.distcp"],
              "pieces": {}, "files": {"__1_0.distcp": ["__1_0.distcp", 5000]}, "narrowed": {}}
    info = _StorageInfo("__1_0.distcp", 100, 200)
    read = SimpleNamespace(storage_offsets=torch.Size([0]), lengths=torch.Size([3]))
    with pytest.raises(RuntimeError, match=rf"__1_0.distcp bytes 100..300 were not restored on this node and could "
                                           rf"not be fetched from s3://{bucket}/gone/__1_0.distcp"):
        fetch_missing(tmp_path / f"step-{STEP}", [(info, read)], record)
    assert not (tmp_path / f"step-{STEP}" / "__1_0.distcp").exists()  # nothing written: never zeros
