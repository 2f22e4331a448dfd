"""The s3 rendezvous against moto over HTTP: torch's compare-and-set contract under racing joiners,
the store torchrun's agents use, torch's own dynamic rendezvous forming a world through them, and
what a round of a command of the user's own adds: a peer gone is a new round, and every node of a
round resumes from one step published in S3."""

from __future__ import annotations

import os
import threading
import time
import unittest
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import boto3
import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import RendezvousParameters

from spot_trainer.distributed.handler import create_s3_handler, endpoint_parts
from spot_trainer.distributed.round_start import (
    RoundStep,
    agree_on_step,
    bring_to_step,
    offer_handover,
    same_as_published,
)
from spot_trainer.distributed.rounds import ROUND_RESUME_ENV
from spot_trainer.distributed.s3_backend import S3RendezvousBackend
from spot_trainer.distributed.s3_objects import ConditionalObjects
from spot_trainer.distributed.s3_store import S3Store
from spot_trainer.storage.steps.remote import RemoteStore
from tests.support.small_s3 import SmallS3
from tests.support.torch_rendezvous_contract import RendezvousBackendTestMixin


@pytest.fixture
def objects(aws_env: dict[str, str], bucket: str) -> ConditionalObjects:
    return ConditionalObjects(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket,
                              "job/rendezvous/job")


def test_compare_and_set_has_exactly_one_winner_per_version(objects: ConditionalObjects) -> None:
    backend = S3RendezvousBackend(objects)
    assert backend.get_state() is None
    state, token, won = backend.set_state(b"first")
    assert (state, won) == (b"first", True)
    assert backend.set_state(b"also first") == (b"first", token, False)  # lost: handed the winner's state
    assert backend.set_state(b"stale", "not-the-etag")[2] is False
    assert backend.set_state(b"second", token)[:3:2] == (b"second", True)
    assert backend.get_state()[0] == b"second"


def test_racing_joiners_never_lose_an_update(objects: ConditionalObjects) -> None:
    """Each joiner reads, adds itself and writes conditionally, retrying on a lost race, as torch's
    dynamic rendezvous does: every one of them ends up in the state exactly once."""
    backend = S3RendezvousBackend(objects)
    backend.set_state(b"")
    joiners, lost_races = 12, []

    def join(name: str) -> None:
        while True:
            state, token = backend.get_state()
            result = backend.set_state(state + name.encode() + b",", token)
            if result and result[2]:
                return
            lost_races.append(name)

    with ThreadPoolExecutor(max_workers=joiners) as pool:
        list(pool.map(join, [f"node{i}" for i in range(joiners)]))
    members = backend.get_state()[0].decode().strip(",").split(",")
    assert sorted(members) == sorted(f"node{i}" for i in range(joiners))
    assert lost_races, "the joiners raced (a lost conditional write was retried)"


def test_store_waits_for_a_key_and_names_it_when_it_never_comes(objects: ConditionalObjects) -> None:
    store = S3Store(objects, timeout=timedelta(seconds=1))
    threading.Timer(0.3, store.set, args=("MASTER_ADDR", "10.0.0.7")).start()
    assert store.get("MASTER_ADDR") == b"10.0.0.7"  # written after the get began
    with pytest.raises(dist.DistStoreError, match="'MASTER_PORT'"):
        store.get("MASTER_PORT")
    prefixed = dist.PrefixStore("torch.rendezvous.job.3", store)  # how torch wraps it per round
    prefixed.multi_set(["a", "b"], ["1", "2"])
    assert prefixed.multi_get(["a", "b"]) == [b"1", b"2"] and store.check(["torch.rendezvous.job.3/a"])


def test_store_counters_and_compare_set_hold_under_races(objects: ConditionalObjects) -> None:
    store = S3Store(objects)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: store.add("members", 1), range(8)))
    assert sorted(results) == list(range(1, 9))  # every increment counted once
    assert store.compare_set("leader", "", "node1") == b"node1"
    assert store.compare_set("leader", "", "node2") == b"node1"  # taken: the current value comes back
    assert store.compare_set("leader", "node1", "node3") == b"node3"
    assert store.delete_key("leader") and not store.check(["leader"]) and store.num_keys() == 1


def handler_params(bucket: str, node: int) -> RendezvousParameters:
    return RendezvousParameters(backend="s3", endpoint=f"{bucket}/job", run_id="job", min_nodes=2, max_nodes=3,
                                local_addr=f"127.0.0.{node}", last_call_timeout=1, join_timeout=60)


def test_torch_forms_one_world_through_it_and_a_leaving_node_does_not_close_it(
    aws_env: dict[str, str], bucket: str
) -> None:
    handlers = [create_s3_handler(handler_params(bucket, node)) for node in (1, 2, 3)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        infos = list(pool.map(lambda handler: handler.next_rendezvous(), handlers))
    assert sorted(info.rank for info in infos) == [0, 1, 2] and {info.world_size for info in infos} == {3}
    masters = {(info.bootstrap_store_info.master_addr, info.bootstrap_store_info.master_port) for info in infos}
    assert len(masters) == 1, "every node meets at the address rank 0 published"
    assert handlers[0].shutdown()  # torchrun does this when its workers fail
    replacement = create_s3_handler(handler_params(bucket, 4))  # reads the state afresh (no cache)
    assert not replacement.is_closed(), "the survivors and a replacement can still form the next round"
    for handler in handlers[1:]:
        handler.shutdown()


def test_the_endpoint_names_bucket_and_job() -> None:
    assert endpoint_parts("s3://my-bucket/job-a") == endpoint_parts("my-bucket/job-a/") == ("my-bucket", "job-a")
    with pytest.raises(ValueError, match="<bucket>/<job prefix>"):
        endpoint_parts("my-bucket")


@pytest.mark.parametrize("how", ["left", "died"])
def test_a_peer_gone_from_the_round_is_a_new_round_for_a_command_of_the_users_own(
    aws_env: dict[str, str], bucket: str, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """torchrun restarts its workers when num_nodes_waiting() is above 0. A peer that leaves (a notice)
    or dies (a power-off) must count, or the survivors' ranks sit in a collective on it until their
    framework's timeout. Only a peer that died makes saving hopeless: one that left saved with them."""
    params = [handler_params(bucket, node) for node in (1, 2, 3)]
    for param in params:  # a node silent for four seconds is dead (torch beats at most every two)
        param.config.update(keep_alive_interval=1, keep_alive_max_attempt=4)
    handlers = [create_s3_handler(param) for param in params]
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda handler: handler.next_rendezvous(), handlers))
    try:
        monkeypatch.setenv(ROUND_RESUME_ENV, "1")
        assert handlers[0].num_nodes_waiting() == 0, "the round is whole"
        if how == "left":
            handlers[2].shutdown()  # the notified node's torchrun leaves the rendezvous
        else:
            handlers[2]._stop_heartbeats()  # powered off: it says nothing more
        deadline = time.monotonic() + 15  # torch reads the shared state again after a second at most
        while handlers[0].num_nodes_waiting() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert handlers[0].num_nodes_waiting() == 1
        assert handlers[0].peer_dead == (how == "died")
        monkeypatch.delenv(ROUND_RESUME_ENV)  # the built-in trainer times its collectives out by itself
        assert handlers[0].num_nodes_waiting() == 0
    finally:
        for handler in handlers[:2]:
            handler.shutdown()


def saved(folder: Path, step: int, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ckpt_{step}.pt"
    path.write_bytes(content)
    return path


def test_every_node_of_a_round_resumes_from_the_one_step_published_in_s3(
    aws_env: dict[str, str], bucket: str, objects: ConditionalObjects, tmp_path: Path
) -> None:
    """The disks differ as a round forms: the writer holds a step still uploading, a replacement what S3
    held when it booted, another node a part its rank wrote. All resume from S3's step, and nothing
    a disk held is deleted: what lies above that step is set aside."""
    remote = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "job")
    for step in (20, 40):
        remote.upload(saved(tmp_path / "published", step, b"weights %d" % step), step)
    disks = {"writer": tmp_path / "writer", "replacement": tmp_path / "replacement", "peer": tmp_path / "peer"}
    saved(disks["writer"], 40, b"weights 40")
    saved(disks["writer"], 60, b"weights 60")  # its agent has not uploaded it yet
    saved(disks["replacement"], 20, b"weights 20")
    saved(disks["peer"], 40, b"part")  # a rank's part of step 40, not the whole checkpoint
    round_store = S3Store(objects)
    for rank, disk in enumerate((disks["writer"], disks["peer"])):
        offer_handover(round_store, rank, published_last_round=False, directory=disk)
    step = agree_on_step(round_store, 0, 2, remote).step
    assert step == 40
    assert agree_on_step(round_store, 1, 2, remote) == RoundStep(40)  # this region's bucket holds it
    resumed = {name: bring_to_step(disk, step, remote) for name, disk in disks.items()}
    assert {path.name if path else None for path in resumed.values()} == {"ckpt_40.pt"}
    assert {path.read_bytes() for path in resumed.values() if path} == {b"weights 40"}
    assert (disks["writer"] / ".unverified-ckpt_60.pt").read_bytes() == b"weights 60"
    assert (disks["peer"] / ".unverified-ckpt_40.pt").read_bytes() == b"part"


def test_a_disk_that_holds_the_published_step_under_names_that_are_not_utf8_needs_no_fetch(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """Its files are found under their own names, not the escaped keys S3 holds them at."""
    remote = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "job")
    checkpoint = tmp_path / "writer" / "step-20"
    checkpoint.mkdir(parents=True)
    (checkpoint / os.fsdecode(b"w\xff.bin")).write_bytes(b"weights 20")
    remote.upload(checkpoint, 20)
    assert same_as_published(tmp_path / "writer", 20, remote) == checkpoint


def test_each_node_records_the_step_its_round_resumes_from_as_an_event(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """What the local spot cloud's report reads (never the line that says it to people)."""
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"])
    RemoteStore(s3, bucket, "job").upload(saved(tmp_path / "published", 20, b"weights 20"), 20)
    for node in ("i-a", "i-b"):
        bring_to_step(tmp_path / node, 20, RemoteStore(s3, bucket, "job", instance=node))
    recorded = RemoteStore(s3, bucket, "job").events("round_resume")
    assert sorted((event["instance"], event["step"]) for event in recorded) == [("i-a", 20), ("i-b", 20)]


@pytest.mark.parametrize("its_rank_now", [0, 1], ids=["still-rank-0", "now-rank-1"])
def test_the_step_the_last_rounds_publisher_hands_over_is_the_rounds_step(
    aws_env: dict[str, str], bucket: str, objects: ConditionalObjects, tmp_path: Path, its_rank_now: int
) -> None:
    """The node that published the last round saved a step as it stopped; its agent uploads it as the
    new round forms. Whichever rank that node holds now, the round resumes from that step."""
    remote = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "job")
    remote.upload(saved(tmp_path / "writer", 20, b"weights 20"), 20)
    newest = saved(tmp_path / "writer", 30, b"weights 30")  # saved as the last round stopped
    disks = {its_rank_now: tmp_path / "writer", 1 - its_rank_now: tmp_path / "replacement"}
    round_store = S3Store(objects)
    for rank, disk in disks.items():
        offer_handover(round_store, rank, published_last_round=disk.name == "writer", directory=disk)
    uploading = threading.Timer(1.0, lambda: remote.upload(newest, 30))
    uploading.start()
    try:
        assert agree_on_step(round_store, 0, 2, remote) == RoundStep(30)
        assert agree_on_step(round_store, 1, 2, remote) == RoundStep(30)
    finally:
        uploading.join()


def test_a_group_rank_0_that_cannot_read_s3_ends_the_round_for_every_node_at_once(
    aws_env: dict[str, str], bucket: str, objects: ConditionalObjects, tmp_path: Path
) -> None:
    gone = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), f"{bucket}-gone", "job")
    round_store = S3Store(objects, timeout=timedelta(seconds=120))
    for rank in (0, 1):
        offer_handover(round_store, rank, published_last_round=False, directory=tmp_path / f"disk-{rank}")
    with pytest.raises(Exception, match="NoSuchBucket"):
        agree_on_step(round_store, 0, 2, gone)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="group rank 0 could not read the published step from S3"):
        agree_on_step(round_store, 1, 2, gone)
    assert time.monotonic() - started < 10  # not the store's two minutes


class TestTorchBackendContract(RendezvousBackendTestMixin, unittest.TestCase):
    """torch's own contract for a rendezvous backend (its RendezvousBackendTestMixin, copied with its
    license into tests/support), asked of this one on moto."""

    @pytest.fixture(autouse=True)
    def backend(self, objects: ConditionalObjects) -> None:
        self.objects = objects
        self._backend = S3RendezvousBackend(objects)

    def _corrupt_state(self) -> None:
        self.objects.put("state", b"\x80 not what this backend writes")


class TestTorchBackendContractOnTheBenchmarksSmallS3(RendezvousBackendTestMixin, unittest.TestCase):
    """The same contract on tests/support/small_s3.py, the S3 benchmarks/rendezvous_scale.py plays 128
    nodes against: its figures are this backend's only while it keeps S3's conditional-write rules."""

    @pytest.fixture(autouse=True)
    def backend(self, aws_env: dict[str, str]) -> Iterator[None]:
        with SmallS3() as s3:
            client = boto3.client("s3", endpoint_url=s3.endpoint)
            client.create_bucket(Bucket="small-s3")
            self.objects = ConditionalObjects(client, "small-s3", "job/rendezvous/job")
            self._backend = S3RendezvousBackend(self.objects)
            yield

    def _corrupt_state(self) -> None:
        self.objects.put("state", b"\x80 not what this backend writes")
