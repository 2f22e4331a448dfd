"""The S3 rendezvous' heartbeats: each node's in its own object, the shared state written only when the
round changes, and a beat's age read on S3's clock, never a peer's."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from torch.distributed.elastic.rendezvous import RendezvousParameters

from spot_trainer.distributed.handler import create_s3_handler
from spot_trainer.distributed.s3_backend import HEARTBEAT, STATE, heard_at
from spot_trainer.distributed.s3_joins import OPS
from spot_trainer.distributed.s3_objects import ConditionalObjects


def params(bucket: str, node: int) -> RendezvousParameters:
    return RendezvousParameters(backend="s3", endpoint=f"{bucket}/job", run_id="job", min_nodes=3, max_nodes=3,
                                local_addr=f"127.0.0.{node}", last_call_timeout=1, join_timeout=60,
                                keep_alive_interval=1, keep_alive_max_attempt=3)


def test_keep_alives_write_each_nodes_own_object_and_leave_the_round_alone(
    aws_env: dict[str, str], bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = ConditionalObjects(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket,
                                 "job/rendezvous/job")
    handlers = [create_s3_handler(params(bucket, node)) for node in (1, 2, 3)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda handler: handler.next_rendezvous(), handlers))
    try:
        formed = objects.listing(STATE).objects
        beats = {name: seen for name, seen in formed.items() if name.startswith(HEARTBEAT)}
        assert len(beats) == 3, "every node's beat is its own object"
        time.sleep(4.5)  # four keep-alives each, more than a silent node is given
        now = objects.listing(STATE).objects
        assert now[STATE].etag == formed[STATE].etag, "no keep-alive rewrote the shared state"
        assert all(now[name].modified > seen.modified for name, seen in beats.items()), "every node beat"
        for handler in handlers:
            assert handler.num_nodes_waiting() == 0
            assert len(handler._state_holder.state.participants) == 3, "no live node was taken for dead"
        handlers[2].shutdown()  # a leave is the node's own object, and its beat deleted
        after = objects.listing(STATE).objects
        assert after[STATE].etag == formed[STATE].etag, "a leave is no write of the shared state"
        assert len([name for name in after if name.startswith(HEARTBEAT)]) == 2
        leaves = [name for name in after if name.startswith(OPS + "0/leave/")]
        assert leaves == [f"{OPS}0/leave/{handlers[2]._this_node!r}"]
        handlers[0]._state_holder.read_at_most_every(0)
        assert handlers[0].num_nodes_waiting() == 0
        assert set(handlers[0]._state_holder.state.participants) == {handlers[0]._this_node, handlers[1]._this_node}
    finally:
        for handler in handlers[:2]:
            handler.shutdown()


def test_a_beats_age_is_read_on_s3s_clock_whatever_this_hosts_says() -> None:
    here = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    s3_now = here + timedelta(hours=1)  # this host's clock is an hour behind S3's
    assert heard_at(s3_now - timedelta(seconds=10), s3_now, here) == here - timedelta(seconds=9)
    assert heard_at(s3_now, s3_now, here) == here, "a beat stamped in S3's present is heard now, not later"
    assert heard_at(here - timedelta(seconds=5), None, here) == here - timedelta(seconds=4), "no Date: ours"


def test_a_training_node_reads_the_state_every_half_interval_however_often_torchrun_asks(
    aws_env: dict[str, str], bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun asks num_nodes_waiting() every 0.1 s while its workers train; each read is a LIST, so at
    128 nodes reading at torch's 1 s cache would be 128 LISTs a second. Once the round formed, a node
    reads at most every half keep-alive interval."""
    slow = [params(bucket, node) for node in (1, 2, 3)]
    for param in slow:
        param.config.update(keep_alive_interval=4)
    handlers = [create_s3_handler(param) for param in slow]
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda handler: handler.next_rendezvous(), handlers))
    listings = 0
    original = ConditionalObjects.listing

    def counted(objects: ConditionalObjects, under: str) -> object:
        nonlocal listings
        listings += 1
        return original(objects, under)

    try:
        for handler in handlers[1:]:
            handler._stop_heartbeats()  # only the node asked below reads
        monkeypatch.setattr(ConditionalObjects, "listing", counted)
        started = time.monotonic()
        while time.monotonic() - started < 6:
            assert handlers[0].num_nodes_waiting() == 0
            time.sleep(0.1)
        assert 2 <= listings <= 5, listings  # every 2 s, the keep-alive's own reads aside (torch's cache: 6)
    finally:
        for handler in handlers:
            handler.shutdown()


def test_a_node_that_beats_more_often_than_it_may_read_still_reads_and_sees_a_peer_die(
    aws_env: dict[str, str], bucket: str
) -> None:
    """A beat is a write of the node's own object, not a read of the round: at 128 nodes a node may read
    only every 5 s, and beats every 1 to 2 intervals; were each beat to put off its next read, it would
    never read, and never see a peer die or a round complete."""
    handlers = [create_s3_handler(params(bucket, node)) for node in (1, 2, 3)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda handler: handler.next_rendezvous(), handlers))
    try:
        handlers[0]._state_holder.read_at_most_every(2.5)  # beats every 1 s: more often than it reads
        handlers[2]._stop_heartbeats()  # dies, without leaving
        started = time.monotonic()
        while handlers[2]._this_node in handlers[0]._state_holder.state.participants:
            assert time.monotonic() - started < 30, "the silent node was never dropped"
            handlers[0].num_nodes_waiting()  # as torchrun asks, every 0.1 s
            time.sleep(0.1)
        assert time.monotonic() - started >= 1, "dropped after three missed beats, not at once"
    finally:
        for handler in handlers:
            handler._stop_heartbeats()
