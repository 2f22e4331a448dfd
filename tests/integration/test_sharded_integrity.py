"""Replays, deterministically, two stories of sharded saves on several nodes against a local S3 (moto):

- a stale shard: the node that lost its peer during an async save of step 100 holds a cut-short shard of
  that save; a one-node round saves and publishes its own step 100; the stale shard, read as "not published
  yet" a moment before, then goes up. It is refused, and every object of the published step keeps its ETag.
- a publish that meets S3 errors (503 SlowDown, connection resets) on MANIFEST.json and latest.json for
  longer than botocore's own retries: the step is published by a later poll once S3 recovers, or its
  abandonment said in one line naming that cause, never a missing part.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from spot_trainer.agent.several_nodes.sharded_saves import ShardedSaves
from spot_trainer.storage.s3.job_objects import RemoteStoreError
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.steps.step_parts import StepParts
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.test_multinode import job_store
from tests.integration.test_step_parts import save
from tests.support.dcp_metadata import write_metadata
from tests.support.s3_proxy import FaultProxy

JOB = "integrity"


@pytest.fixture
def store(aws_env: dict[str, str], bucket: str) -> RemoteStore:
    return job_store(aws_env, bucket, JOB)


def node(store: RemoteStore, name: str, s3: object | None = None) -> StepParts:
    return StepParts(RemoteStore(s3 or store.s3, store.bucket, JOB, instance=name, keep=store.keep))


def etags(store: RemoteStore, step: int) -> dict[str, str]:
    listed = store.s3.list_objects_v2(Bucket=store.bucket, Prefix=store.step_prefix(step)).get("Contents", [])
    return {item["Key"]: item["ETag"] for item in listed}


def publish_two_node_step(store: RemoteStore, root: Path, step: int) -> None:
    for rank, folder in enumerate(save(root, step, 2)):
        node(store, f"i-{rank}").upload(folder, step)
    assert store.latest_step() == step


def test_a_stale_shard_never_changes_a_published_step(store: RemoteStore, tmp_path: Path) -> None:
    publish_two_node_step(store, tmp_path / "80", 80)
    # Rank 1's node powered off during the async save of step 100: the survivor holds its own shard, cut short,
    # and no .metadata.
    stale = tmp_path / "survivor" / "step-100"
    stale.mkdir(parents=True)
    (stale / "__0_0.distcp").write_bytes(b"s" * 1629)
    # A one-node round from step 80 saves its own step 100, whole, and publishes it.
    fresh = save(tmp_path / "round", 100, 1, shard_bytes=3240)
    assert node(store, "i-0").upload(fresh[0], 100) is UploadOutcome.PUBLISHED
    published = etags(store, 100)
    # The survivor read latest.json and the save's settling before the publish: both said "not yet".
    survivor = node(store, "i-0")
    survivor.store.latest_step = lambda: 80  # type: ignore[method-assign]
    survivor.settlement = lambda step, identity: None  # type: ignore[method-assign]
    with pytest.raises(RemoteStoreError, match=r"__0_0.distcp holds 1629 bytes, its storage data 3240"):
        survivor.upload(stale, 100)
    # The same shard at the very size its storage data says (a save of other bytes): its time says it is not
    # this save's, and were that wrong, S3 keeps the first writer's object (If-None-Match).
    (stale / "__0_0.distcp").write_bytes(b"s" * 3240)
    later = os.stat(fresh[0] / ".metadata").st_mtime + 5
    os.utime(stale / "__0_0.distcp", (later, later))
    with pytest.raises(RemoteStoreError, match="was written after it"):
        survivor.upload(stale, 100)
    old = os.stat(fresh[0] / ".metadata").st_mtime - 5
    os.utime(stale / "__0_0.distcp", (old, old))
    with pytest.raises(RemoteStoreError, match="another writer's object is there already"):
        survivor.upload(stale, 100)
    assert etags(store, 100) == published
    restored = store.restore_at_or_below(tmp_path / "fresh", 100)
    assert restored is not None and store.restored_step == 100
    assert (restored / "__0_0.distcp").read_bytes() == (fresh[0] / "__0_0.distcp").read_bytes()


def test_nothing_goes_into_a_settled_save(store: RemoteStore, tmp_path: Path) -> None:
    folders = save(tmp_path, 30, 2)
    coordinator = node(store, "i-0")
    assert coordinator.upload(folders[0], 30) is UploadOutcome.PART_SENT
    identity = coordinator.sent[30]
    assert store.create_once(StepParts.settled_name(30, identity), {"outcome": "abandoned", "instance": "i-0"})
    before = etags(store, 30)
    with pytest.raises(RemoteStoreError, match=r"its save is settled \(abandoned\) already"):
        node(store, "i-1").upload(folders[1], 30)
    assert etags(store, 30) == before and store.latest_step() is None


def test_a_node_sends_its_own_part_again_after_a_failure(store: RemoteStore, tmp_path: Path) -> None:
    folders = save(tmp_path, 40, 2)
    assert node(store, "i-0").upload(folders[0], 40) is UploadOutcome.PART_SENT
    # its objects are its own: taken as sent
    assert node(store, "i-0").upload(folders[0], 40) is UploadOutcome.PART_SENT
    assert node(store, "i-1").upload(folders[1], 40) is UploadOutcome.PUBLISHED


class Outage:
    """S3 failing every write of the keys named, for as long as `on` is set: 503 SlowDown or a reset."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names, self.on, self.refused = names, threading.Event(), 0

    def fault(self, key: str) -> bool:
        if self.on.is_set() and key.endswith(self.names):
            self.refused += 1
            return True
        return False


@pytest.fixture
def outage(aws_env: dict[str, str], request: pytest.FixtureRequest) -> Iterator[tuple[Outage, str]]:
    kind = request.param
    names = Outage(("MANIFEST.json", "latest.json"))
    port = int(aws_env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
    with FaultProxy(port, write_fault=lambda key: kind if names.fault(key) else None) as proxy:
        yield names, proxy.endpoint


def proxied_store(endpoint: str, store: RemoteStore, name: str) -> StepParts:
    s3 = boto3.client("s3", endpoint_url=endpoint, config=Config(retries={"mode": "standard", "max_attempts": 3},
                                                                 connect_timeout=2, read_timeout=5))
    return node(store, name, s3)


@pytest.mark.parametrize("outage", ["503", "reset"], indirect=True)
def test_a_publish_that_meets_s3_errors_is_finished_by_a_later_poll(store: RemoteStore, tmp_path: Path,
                                                                   outage: tuple[Outage, str]) -> None:
    names, endpoint = outage
    publish_two_node_step(store, tmp_path / "80", 80)
    folders = save(tmp_path / "100", 100, 2)
    lines: list[list[str]] = [[], []]
    saves = [ShardedSaves(proxied_store(endpoint, store, f"i-{rank}"), folders[rank].parent, lines[rank].append,
                          lambda kind, **fields: None, takeover_seconds=0.0) for rank in range(2)]
    assert saves[0].parts.upload(folders[0], 100) is UploadOutcome.PART_SENT
    names.on.set()  # S3 refuses the manifest and latest.json, beyond botocore's retries
    # whole, settled by this node, not published
    assert saves[1].parts.upload(folders[1], 100) is UploadOutcome.PART_SENT
    for _ in range(3):
        for each in saves:
            each.check(store.latest_step)
    assert store.latest_step() == 80 and names.refused > 0
    assert lines[1] and "is whole in S3 but not published yet: S3 failed its publish" in lines[1][0], lines
    published = etags(store, 100)
    names.on.clear()  # S3 recovers
    saves[0].check(store.latest_step)  # the other node's poll finishes it: the settling is old enough
    assert store.latest_step() == 100
    saves[1].check(store.latest_step)
    assert not any("abandoned" in line for line in lines[0] + lines[1]), lines
    after = etags(store, 100)
    assert {key: tag for key, tag in after.items() if key in published} == published  # nothing rewritten
    restored = store.restore_at_or_below(tmp_path / "fresh", 100)
    assert restored is not None and store.restored_step == 100


@pytest.mark.parametrize("outage", ["503"], indirect=True)
def test_a_publish_s3_never_takes_is_abandoned_in_a_line_naming_why(store: RemoteStore, tmp_path: Path,
                                                                   outage: tuple[Outage, str]) -> None:
    names, endpoint = outage
    publish_two_node_step(store, tmp_path / "80", 80)
    folders = save(tmp_path / "100", 100, 2)
    lines: list[str] = []
    events: list[dict[str, object]] = []
    saves = [ShardedSaves(proxied_store(endpoint, store, f"i-{rank}"), folders[rank].parent, lines.append,
                          lambda kind, **fields: events.append(fields), publish_seconds=0.0) for rank in range(2)]
    assert saves[0].parts.upload(folders[0], 100) is UploadOutcome.PART_SENT
    names.on.set()
    assert saves[1].parts.upload(folders[1], 100) is UploadOutcome.PART_SENT
    saves[1].check(store.latest_step)
    assert store.latest_step() == 80
    assert lines[-1].startswith("checkpoint step 100 abandoned: it is whole in S3, but S3 refused its MANIFEST.json "
                                "or latest.json for 0s"), lines
    assert "did not reach S3" not in " ".join(lines)
    assert events == [{"step": 100, "missing": "its publish", "removed": False}]


def test_a_part_written_over_by_moto_is_refused_as_s3_does(store: RemoteStore, tmp_path: Path) -> None:
    """moto 5.2.5 plays If-None-Match on PutObject and CompleteMultipartUpload as S3 does (412)."""
    key = store.step_prefix(1) + "x"
    store.s3.put_object(Bucket=store.bucket, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(Exception, match="PreconditionFailed"):
        store.s3.put_object(Bucket=store.bucket, Key=key, Body=b"second", IfNoneMatch="*")
    upload = store.s3.create_multipart_upload(Bucket=store.bucket, Key=key)
    part = store.s3.upload_part(Bucket=store.bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"y")
    with pytest.raises(Exception, match="PreconditionFailed"):
        store.s3.complete_multipart_upload(Bucket=store.bucket, Key=key, UploadId=upload["UploadId"], IfNoneMatch="*",
                                           MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]})
    assert store.s3.get_object(Bucket=store.bucket, Key=key)["Body"].read() == b"first"


def test_storage_data_decides_membership_not_names(tmp_path: Path) -> None:
    folder = tmp_path / "step-5"
    folder.mkdir()
    (folder / "__0_0.distcp").write_bytes(b"x" * 10)
    write_metadata(folder, {"__0_0.distcp": 10, "__1_0.distcp": 12})
    from spot_trainer.storage.saves import shards
    assert shards.extents((folder / ".metadata").read_bytes()) == {"__0_0.distcp": 10, "__1_0.distcp": 12}
    assert shards.extents(b"not a pickle") is None
