"""A step three FSDP2 ranks saved, restored by two nodes of one rank each and loaded by DCP at world size 2
(real processes, gloo, moto): each node fetches, from `.metadata` alone, the stored chunks its rank's load
plan reads, not the whole step, and the loaded state equals the saved one to the bit. A rank whose file
vanished from its node's disk before the load fetches what it reads of it from S3 and the load goes on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localcloud.moto_server import free_port
from spot_trainer.agent.program.command import with_auto_resume
from spot_trainer.storage.saves.shards import NodeRanks
from spot_trainer.storage.steps.checkpoint_restore import restored_in_part
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.steps.step_parts import StepParts
from tests.integration.test_multinode import job_store

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "dcp_reshard.py"
JOB = "reshard"
STEP = 40
SAVED, LOADED = 3, 2
RUN_SECONDS = 240  # three or two processes importing torch and forming a gloo world, on a slow shared machine


def ranks_run(mode: str, world: int, env: dict[str, str], tmp_path: Path,
              **extra: str) -> subprocess.CompletedProcess[str]:
    arguments = [f"--{name}={value}" for name, value in extra.items()]
    done = subprocess.run([sys.executable, str(SCRIPT), mode, f"--world={world}", f"--port={free_port()}",
                           f"--step={STEP}", f"--reference={tmp_path / 'reference.pt'}", *arguments],
                          env=env, capture_output=True, text=True, timeout=RUN_SECONDS)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def shares_of(published: RemoteStore, tmp_path: Path) -> list[Path]:
    """Each node of the smaller world restores what its rank reads into its own folder."""
    nodes = []
    for group_rank in range(LOADED):
        disk = tmp_path / "nodes" / f"node{group_rank}"
        restored = published.restore_at_or_below(disk, STEP, NodeRanks(group_rank=group_rank, nodes=LOADED,
                                                                      per_node=1))
        assert restored is not None and published.restored_step == STEP
        nodes.append(restored)
    return nodes


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The step SAVED ranks saved (one folder holding every node's files) and the whole state beside it."""
    root = tmp_path_factory.mktemp("saved")
    ranks_run("save", SAVED, {**os.environ, "CHECKPOINT_DIR": str(root)}, root)
    return root


@pytest.fixture
def published(saved: Path, aws_env: dict[str, str], bucket: str, tmp_path: Path) -> RemoteStore:
    """The step saved by SAVED ranks, each node's part (its shard; node 0's with `.metadata`) sent as its agent
    sends it, and published."""
    shutil.copy2(saved / "reference.pt", tmp_path / "reference.pt")
    store = job_store(aws_env, bucket, JOB)
    for rank in range(SAVED):
        part = tmp_path / "parts" / f"node{rank}" / f"step-{STEP}"
        part.mkdir(parents=True)
        for name in [f"__{rank}_0.distcp", *([".metadata"] if rank == 0 else [])]:
            shutil.copy2(saved / f"step-{STEP}" / name, part / name)
        StepParts(RemoteStore(store.s3, store.bucket, JOB, instance=f"i-{rank}", keep=store.keep)).upload(part, STEP)
    assert store.latest_step() == STEP
    return store


def loaded(tmp_path: Path) -> str:
    """The load at world size LOADED, each rank in its node's folder, under the start-up hook the agent installs
    in a command's processes; its output."""
    env = with_auto_resume({**os.environ, "CHECKPOINT_DIR": str(tmp_path / "nodes" / "node0")})
    done = ranks_run("load", LOADED, env, tmp_path, nodes=str(tmp_path / "nodes"))
    assert "load: match" in done.stdout, done.stdout + done.stderr
    return done.stderr


def test_each_node_fetches_only_the_chunks_its_rank_reads_and_the_load_equals_the_save(
        published: RemoteStore, tmp_path: Path) -> None:
    nodes = shares_of(published, tmp_path)
    whole = sum(size for _, size in (restored_in_part(nodes[0].parent) or {})["files"].values())
    for node in nodes:
        record = restored_in_part(node.parent) or {}
        assert record.get("ranks") == [int(node.parent.name.removeprefix("node")), LOADED, 1]
        fetched = sum(length for ranges in record["pieces"].values() for _, length in ranges) + sum(
            size for key, (_, size) in record["files"].items() if key not in record["pieces"]
            and key not in record["absent"])
        assert 0 < fetched < whole * 0.8, (fetched, whole)
    # Rows of a stored chunk a node's rank does not use are left out (a hole), where DCP reads the chunk whole.
    # (each checked against its archive's own layout once fetched, or fetched whole, in which case none is left)
    assert any(chunks for node in nodes for chunks in (restored_in_part(node.parent) or {})["narrowed"].values())
    # Had a rank read a byte its node did not fetch, it would have said so (and fetched it).
    assert "which this node had not restored" not in loaded(tmp_path)


def test_a_rank_whose_file_vanished_before_the_load_fetches_what_it_reads_and_the_load_goes_on(
        published: RemoteStore, tmp_path: Path) -> None:
    node0, node1 = shares_of(published, tmp_path)
    record = restored_in_part(node0.parent) or {}
    kept = sorted(name for key, (name, _) in record["files"].items() if key not in record["absent"])
    assert kept, record
    for name in kept:  # every shard file rank 0 reads, whole or in pieces
        (node0 / name).unlink()
    said = loaded(tmp_path)
    lines = [line for line in said.splitlines() if "which this node had not restored" in line]
    assert lines and all(line.startswith("spot-trainer: rank 0 reads ") for line in lines), said
    assert {line.split(" reads ")[1].split(" ")[0] for line in lines} == set(kept), lines
