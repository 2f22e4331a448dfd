"""A checkpoint written in shards on three nodes, sent part by part to S3 (moto): a step is published
once, whole, by whichever node sends the last part; parts of two saves of one step never mix; a node
killed while it uploads its shard leaves that step unpublished, and the step is abandoned in one line
naming the missing rank, its objects removed, the previous step standing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import boto3
import pytest
import torch

from spot_trainer.agent.several_nodes.sharded_saves import ShardedSaves
from spot_trainer.storage.steps.remote import RemoteStore, RemoteStoreError
from spot_trainer.storage.steps.step_parts import StepParts
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.test_multinode import job_store
from tests.support.dcp_metadata import write_metadata

JOB = "sharded"


def save(root: Path, step: int, world: int, *, tag: str = "a", shard_bytes: int = 1000) -> list[Path]:
    """One DCP save of `world` ranks, one node per rank: node 0's folder holds `.metadata` (which lists
    every rank's shard) beside its own shard, node r's only `__<r>_0.distcp`."""
    folders = []
    for rank in range(world):
        folder = root / f"node{rank}" / f"step-{step}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"__{rank}_0.distcp").write_bytes(f"{tag}{rank}".encode() * (shard_bytes // 2))
        folders.append(folder)
    sizes = {f"__{rank}_0.distcp": (folder / f"__{rank}_0.distcp").stat().st_size
             for rank, folder in enumerate(folders)}
    write_metadata(folders[0], sizes, tag)
    return folders


@pytest.fixture
def store(aws_env: dict[str, str], bucket: str) -> RemoteStore:
    return job_store(aws_env, bucket, JOB)


def node(store: RemoteStore, name: str) -> StepParts:
    """One node's view: the same bucket, its own instance id."""
    return StepParts(RemoteStore(store.s3, store.bucket, JOB, instance=name, keep=store.keep))


def test_a_step_is_published_once_every_listed_shard_is_in_s3(store: RemoteStore, tmp_path: Path) -> None:
    folders = save(tmp_path, 30, 3)
    nodes = [node(store, f"i-{rank}") for rank in range(3)]
    with pytest.raises(RemoteStoreError, match="has not sent it"):  # rank 1's node before the coordinator's
        nodes[1].upload(folders[1], 30)
    assert nodes[0].upload(folders[0], 30) is UploadOutcome.PART_SENT
    assert nodes[2].upload(folders[2], 30) is UploadOutcome.PART_SENT
    assert store.latest_step() is None and not store.has_checkpoint(30)
    assert nodes[0].missing_parts(30) == "the shards of rank(s) 1"
    assert nodes[1].upload(folders[1], 30) is UploadOutcome.PUBLISHED  # the last part publishes
    assert store.latest_step() == 30
    restored = store.restore_at_or_below(tmp_path / "fresh", 30)
    assert restored is not None
    assert sorted(path.name for path in restored.iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp",
                                                                "__2_0.distcp"]
    for folder in folders:
        for path in folder.iterdir():
            assert (restored / path.name).read_bytes() == path.read_bytes()


def test_parts_of_two_saves_of_one_step_never_mix(store: RemoteStore, tmp_path: Path) -> None:
    first = save(tmp_path / "first", 40, 3, tag="a")
    nodes = [node(store, f"i-{rank}") for rank in range(3)]
    nodes[0].upload(first[0], 40)
    nodes[1].upload(first[1], 40)
    # Rank 2's node died; the next round (two nodes) trains step 40 again and saves it anew.
    second = save(tmp_path / "second", 40, 2, tag="b")
    assert nodes[0].upload(second[0], 40) is UploadOutcome.PART_SENT
    with pytest.raises(RemoteStoreError, match="not listed by it"):  # the first save's shard: not listed any more
        nodes[2].upload(first[2], 40)
    assert store.latest_step() is None
    assert nodes[1].upload(second[1], 40) is UploadOutcome.PUBLISHED
    restored = store.restore_at_or_below(tmp_path / "fresh", 40)
    assert restored is not None
    assert (restored / "__1_0.distcp").read_bytes() == (second[1] / "__1_0.distcp").read_bytes()


def test_retention_counts_published_steps_and_removes_unpublished_parts(aws_env: dict[str, str], bucket: str,
                                                                        tmp_path: Path) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, JOB, keep=2)
    nodes = [node(store, f"i-{rank}") for rank in range(2)]
    unfinished = save(tmp_path / "unfinished", 15, 2)
    nodes[0].upload(unfinished[0], 15)  # rank 1's part never comes
    for step in (10, 20, 30):
        folders = save(tmp_path / str(step), step, 2)
        if step == 20:
            nodes[0].upload(unfinished[0], 15)
        nodes[0].upload(folders[0], step)
        nodes[1].upload(folders[1], step)
    assert store.latest_step() == 30
    assert store.remote_steps() == [20, 30]  # two published steps kept; step 15's part and step 10 removed


KILLED_UPLOAD = textwrap.dedent("""
    import sys
    from pathlib import Path
    import boto3
    from spot_trainer.storage.steps.remote import RemoteStore
    from spot_trainer.storage.steps.step_parts import StepParts
    endpoint, bucket, job, folder, step = sys.argv[1:]
    store = RemoteStore(boto3.client("s3", endpoint_url=endpoint), bucket, job, instance="i-1")
    StepParts(store).upload(Path(folder), int(step))
    print("uploaded")
""")


def test_a_node_killed_while_uploading_its_shard_never_publishes_the_step(
    aws_env: dict[str, str], store: RemoteStore, tmp_path: Path
) -> None:
    standing = save(tmp_path / "standing", 10, 2)
    node(store, "i-0").upload(standing[0], 10)
    node(store, "i-1").upload(standing[1], 10)
    assert store.latest_step() == 10
    folders = save(tmp_path / "cut", 20, 2, shard_bytes=160 * 1024 * 1024)
    coordinator = node(store, "i-0")
    assert coordinator.upload(folders[0], 20) is UploadOutcome.PART_SENT
    uploading = subprocess.Popen([sys.executable, "-c", KILLED_UPLOAD, aws_env["AWS_ENDPOINT_URL"], store.bucket, JOB,
                                  str(folders[1]), "20"], env={**os.environ, **aws_env}, stdout=subprocess.PIPE,
                                 text=True)
    try:
        def shard_upload_begun() -> bool:
            uploads = store.s3.list_multipart_uploads(Bucket=store.bucket, Prefix=store.step_prefix(20))
            return any(upload["Key"].endswith("/__1_0.distcp") for upload in uploads.get("Uploads", []))

        deadline = time.monotonic() + 120
        while not shard_upload_begun():
            assert uploading.poll() is None and time.monotonic() < deadline, "the shard's upload never began"
            time.sleep(0.01)
        uploading.send_signal(signal.SIGKILL)  # the node powered off mid-upload
    finally:
        uploading.kill()
        uploading.wait()
    assert store.latest_step() == 10 and not store.has_checkpoint(20)
    assert not [key for key, _ in StepParts(store).listing(20).parts if key.instance == "i-1"]

    lines: list[str] = []
    events: list[dict[str, object]] = []
    saves = ShardedSaves(coordinator, tmp_path / "node0", lines.append, lambda kind, **fields: events.append(fields),
                         arrival_seconds=0.0)
    assert saves.parts.upload(folders[0], 20) is UploadOutcome.PART_SENT  # sent again: this node now follows the step
    saves.check(store.latest_step)
    assert lines == ["checkpoint step 20 abandoned: the shards of rank(s) 1 did not reach S3 within 0s of this "
                     "node's part; its objects were removed, and the step published before it stands"], lines
    assert events == [{"step": 20, "missing": "the shards of rank(s) 1", "removed": True}]
    assert store.remote_steps() == [10] and store.latest_step() == 10
    listed = store.s3.list_objects_v2(Bucket=store.bucket, Prefix=store.step_prefix(20)).get("Contents", [])
    assert listed == []
    assert store.restore_at_or_below(tmp_path / "fresh", None) is not None and store.restored_step == 10


def hf_fsdp_save(root: Path, step: int, world: int) -> list[Path]:
    """HF Trainer's sharded FSDP checkpoint (transformers 5.23 with accelerate 1.15's save_fsdp_model and
    save_fsdp_optimizer): `checkpoint-<N>/` with the DCP folders `pytorch_model_fsdp_0/` and `optimizer_0/`,
    each rank's `rng_state_<rank>.pth`, and on rank 0 alone the scheduler and `trainer_state.json` (last)."""
    folders = []
    for rank in range(world):
        folder = root / f"node{rank}" / f"checkpoint-{step}"
        for inner in ("pytorch_model_fsdp_0", "optimizer_0"):
            (folder / inner).mkdir(parents=True, exist_ok=True)
            (folder / inner / f"__{rank}_0.distcp").write_bytes(f"{inner}{rank}".encode() * 100)
            if rank == 0:
                write_metadata(folder / inner, {f"__{r}_0.distcp": len(f"{inner}{r}") * 100 for r in range(world)})
        (folder / f"rng_state_{rank}.pth").write_bytes(b"rng")
        if rank == 0:
            (folder / "scheduler.pt").write_bytes(b"scheduler")
            (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        folders.append(folder)
    return folders


def test_hf_trainers_sharded_fsdp_checkpoint_goes_up_from_every_node(store: RemoteStore, tmp_path: Path) -> None:
    folders = hf_fsdp_save(tmp_path, 50, 2)
    saves = [ShardedSaves(node(store, f"i-{rank}"), folder.parent, print, lambda kind, **fields: None)
             for rank, folder in enumerate(folders)]
    assert saves[1].ready(writer_done=False, above=None) is None  # the coordinator's part is not in S3 yet
    part = saves[0].ready(writer_done=False, above=None)
    assert part is not None and part.path == folders[0] and part.step == 50
    assert saves[0].parts.upload(part.path, part.step) is UploadOutcome.PART_SENT
    part = saves[1].ready(writer_done=False, above=None)
    assert part is not None and part.path == folders[1]
    assert saves[1].parts.upload(part.path, part.step) is UploadOutcome.PUBLISHED
    restored = store.restore_at_or_below(tmp_path / "fresh", 50)
    assert restored is not None and restored.name == "checkpoint-50"
    held = sorted(str(path.relative_to(restored)) for path in restored.rglob("*") if path.is_file())
    assert held == ["optimizer_0/.metadata", "optimizer_0/__0_0.distcp", "optimizer_0/__1_0.distcp",
                    "pytorch_model_fsdp_0/.metadata", "pytorch_model_fsdp_0/__0_0.distcp",
                    "pytorch_model_fsdp_0/__1_0.distcp", "rng_state_0.pth", "scheduler.pt", "trainer_state.json"]


def test_a_restore_downloads_only_the_shards_this_disk_lacks(store: RemoteStore, tmp_path: Path) -> None:
    folders = save(tmp_path, 60, 3)
    for rank, folder in enumerate(folders):
        node(store, f"i-{rank}").upload(folder, 60)
    assert store.latest_step() == 60
    disk = folders[1].parent  # rank 1's node: its own shard, set aside as the round began
    os.replace(folders[1], disk / ".unverified-step-60")
    (disk / "step-60").mkdir()
    (disk / "step-60" / "__2_0.distcp").write_bytes(b"not rank 2's shard")  # same name, other bytes: fetched
    own = disk / ".unverified-step-60" / "__1_0.distcp"
    restored = store.restore_at_or_below(disk, 60)
    assert restored == disk / "step-60"
    assert (restored / "__1_0.distcp").stat().st_ino == own.stat().st_ino  # linked, not downloaded
    for rank, folder in enumerate(folders):
        name = f"__{rank}_0.distcp"
        expected = (own if rank == 1 else folder / name).read_bytes()
        assert (restored / name).read_bytes() == expected


def test_shards_set_aside_at_or_below_the_published_step_do_not_pile_up(store: RemoteStore, tmp_path: Path) -> None:
    disk = tmp_path / "node1"
    for name in (".unverified-step-20", ".unverified-step-40", ".incomplete-checkpoint-10", "step-30"):
        (disk / name).mkdir(parents=True)
        (disk / name / "__1_0.distcp").write_bytes(b"shard")
    (disk / ".unverified-model_5.pt").write_bytes(b"not a sharded save")
    saves = ShardedSaves(node(store, "i-1"), disk, print, lambda kind, **fields: None)
    assert sorted(saves.prune_set_aside(30)) == [".incomplete-checkpoint-10", ".unverified-step-20"]
    assert sorted(path.name for path in disk.iterdir()) == [".unverified-model_5.pt", ".unverified-step-40", "step-30"]


def test_a_save_settled_and_written_whose_publish_never_came_is_the_step(store: RemoteStore,
                                                                         tmp_path: Path) -> None:
    first = save(tmp_path / "first", 70, 2, tag="a")
    for rank, folder in enumerate(first):
        node(store, f"i-{rank}").upload(folder, 70)
    # The node that wrote step 70's manifest died before latest.json moved: as if it never had.
    store.s3.delete_object(Bucket=store.bucket, Key=store.key("latest.json"))
    second = save(tmp_path / "second", 70, 2, tag="b")  # the next round trains step 70 again
    assert node(store, "i-0").upload(second[0], 70) is UploadOutcome.PART_SENT
    assert node(store, "i-1").upload(second[1], 70) is UploadOutcome.PUBLISHED  # the settled save, whole, is published
    restored = store.restore_at_or_below(tmp_path / "fresh", 70)
    assert restored is not None and store.restored_step == 70
    assert (restored / "__1_0.distcp").read_bytes() == (first[1] / "__1_0.distcp").read_bytes()


def aged(folder: Path, seconds: float) -> None:
    """The save was made `seconds` ago (its files' times), as an earlier round's would have been."""
    for path in folder.rglob("*"):
        past = path.stat().st_mtime - seconds
        os.utime(path, (past, past))


def test_shards_of_a_newer_save_never_join_an_earlier_save_of_the_same_step(store: RemoteStore,
                                                                           tmp_path: Path) -> None:
    earlier = save(tmp_path / "earlier", 80, 3, tag="a")
    for folder in earlier:
        aged(folder, 60)
    nodes = [node(store, f"i-{rank}") for rank in range(3)]
    nodes[0].upload(earlier[0], 80)
    nodes[1].upload(earlier[1], 80)  # rank 2's node was lost before it sent its part
    newer = save(tmp_path / "newer", 80, 3, tag="b")  # the next round trains step 80 again
    waiting = ShardedSaves(nodes[2], newer[2].parent, print, lambda kind, **fields: None)
    assert waiting.ready(writer_done=False, above=None) is None  # the record in S3 is the earlier save's
    with pytest.raises(RemoteStoreError, match="not those of the save whose .metadata is in S3"):
        nodes[2].upload(newer[2], 80)
    assert store.latest_step() is None
    # the newer save's coordinator: now rank 2's shards join it
    assert nodes[0].upload(newer[0], 80) is UploadOutcome.PART_SENT
    part = waiting.ready(writer_done=False, above=None)
    assert part is not None and waiting.parts.upload(part.path, part.step) is UploadOutcome.PART_SENT
    assert nodes[1].upload(newer[1], 80) is UploadOutcome.PUBLISHED
    restored = store.restore_at_or_below(tmp_path / "fresh", 80)
    assert restored is not None
    assert all((restored / f"__{rank}_0.distcp").read_bytes() == (newer[rank] / f"__{rank}_0.distcp").read_bytes()
               for rank in range(3))


def test_a_save_is_abandoned_only_while_it_is_the_one_in_s3_and_nobody_settled_it(store: RemoteStore,
                                                                                 tmp_path: Path) -> None:
    earlier = save(tmp_path / "earlier", 90, 3, tag="a")
    lines: list[str] = []
    first = ShardedSaves(node(store, "i-0"), earlier[0].parent, lines.append, lambda kind, **fields: None,
                         arrival_seconds=0.0)
    assert first.parts.upload(earlier[0], 90) is UploadOutcome.PART_SENT
    newer = save(tmp_path / "newer", 90, 2, tag="b")
    aged(earlier[0], 60)
    node(store, "i-0b").upload(newer[0], 90)  # another save of step 90 began (a new round's coordinator)
    first.check(store.latest_step)
    assert "its objects are left to retention" in lines[-1], lines
    assert node(store, "i-1").upload(newer[1], 90) is UploadOutcome.PUBLISHED  # the newer save was never touched
    assert store.latest_step() == 90

    again = save(tmp_path / "again", 95, 2, tag="c")
    settling = ShardedSaves(node(store, "i-0"), again[0].parent, lines.append, lambda kind, **fields: None,
                            arrival_seconds=0.0)
    assert settling.parts.upload(again[0], 95) is UploadOutcome.PART_SENT
    identity = settling.parts.sent[95]
    said = len(lines)
    assert store.create_once(StepParts.settled_name(95, identity), {"outcome": "published", "instance": "i-1",
                                                                     "settled_at": time.time()})  # i-1 publishes it
    settling.check(store.latest_step)
    assert lines[said:] == [], lines  # not abandoned: the node that settled it publishes it
    assert store.s3.list_objects_v2(Bucket=store.bucket, Prefix=store.step_prefix(95))["KeyCount"] > 0


def test_lightnings_sharded_fsdp_checkpoint_goes_up_from_every_node(store: RemoteStore, tmp_path: Path) -> None:
    """Lightning 2.6's FSDPStrategy(state_dict_type="sharded"): a folder named like its checkpoint file,
    `epoch=0-step=60.ckpt/`, with every rank's shards and, from rank 0, `.metadata` and `meta.pt` last."""
    folders = []
    for rank in range(2):
        folder = tmp_path / f"node{rank}" / "epoch=0-step=60.ckpt"
        folder.mkdir(parents=True)
        (folder / f"__{rank}_0.distcp").write_bytes(f"lightning{rank}".encode() * 100)
        if rank == 0:
            write_metadata(folder, {f"__{r}_0.distcp": len(f"lightning{r}") * 100 for r in range(2)})
        folders.append(folder)
    saves = [ShardedSaves(node(store, f"i-{rank}"), folder.parent, print, lambda kind, **fields: None)
             for rank, folder in enumerate(folders)]
    assert saves[0].ready(writer_done=False, above=None) is None  # meta.pt, written last, is not there yet
    torch.save({"global_step": 60}, folders[0] / "meta.pt")
    for ready_node in saves:
        part = ready_node.ready(writer_done=False, above=None)
        assert part is not None and part.step == 60
        ready_node.parts.upload(part.path, part.step)
    assert store.latest_step() == 60
    restored = store.restore_at_or_below(tmp_path / "fresh", 60)
    assert restored is not None and sorted(path.name for path in restored.iterdir()) == [
        ".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
