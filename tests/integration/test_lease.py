"""The single-writer lease and fenced publishing against moto's conditional writes."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from spot_trainer.storage.s3.lease import Lease, LeaseError
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.remote_helpers import make_checkpoint, small_part_store
from tests.support.clock import ManualClock


def race(*actions: Any) -> list[Any]:
    """Run the callables at the same moment on separate threads; their results in order."""
    start = threading.Barrier(len(actions))

    def run(action: Any) -> Any:
        start.wait()
        return action()

    with ThreadPoolExecutor(len(actions)) as pool:
        return list(pool.map(run, actions))


def test_two_agents_at_once_exactly_one_holds(s3: Any, bucket: str) -> None:
    for round_ in range(5):
        job = f"race-{round_}"
        leases = [Lease(s3, bucket, job, owner=f"i-{n}", ttl_seconds=30) for n in range(3)]
        won = race(*(lease.acquire for lease in leases))
        assert won.count(True) == 1, won
        assert [lease.held() for lease in leases] == won


def test_expired_lease_is_taken_over_with_a_higher_token(s3: Any, bucket: str) -> None:
    clock = ManualClock()
    old = Lease(s3, bucket, "job", owner="i-old", ttl_seconds=1, clock=clock)
    new = Lease(s3, bucket, "job", owner="i-new", ttl_seconds=30, clock=clock)
    assert old.acquire() and old.token == 1
    assert not new.acquire()  # still live
    clock.advance(1.2)
    assert not old.held()
    assert new.acquire() and new.token == 2
    assert not old.renew()  # the old holder learns it lost the job
    assert new.renew() and new.held() and new.token == 2


def test_release_hands_over_at_once_and_tokens_keep_growing(s3: Any, bucket: str) -> None:
    first = Lease(s3, bucket, "job", owner="i-1", ttl_seconds=60)
    second = Lease(s3, bucket, "job", owner="i-2", ttl_seconds=60)
    assert first.acquire()
    first.release()
    assert not first.held()
    assert second.acquire() and second.token == first.token + 1
    first.release()  # no longer ours: must not disturb the new holder
    assert second.still_ours()


def test_stale_holder_can_no_longer_publish(s3: Any, bucket: str, tmp_path: Path) -> None:
    store = small_part_store(bucket, "job")
    clock = ManualClock()
    stale = Lease(s3, bucket, "job", owner="i-draining", ttl_seconds=1, clock=clock)
    assert stale.acquire()
    assert store.upload(make_checkpoint(tmp_path, 1), 1, lease=stale) is UploadOutcome.PUBLISHED
    clock.advance(1.2)
    successor = Lease(s3, bucket, "job", owner="i-replacement", ttl_seconds=60, clock=clock)
    assert successor.acquire()
    assert store.upload(make_checkpoint(tmp_path, 3), 3, lease=successor) is UploadOutcome.PUBLISHED
    # The drained instance wakes up with a later step: refused by both the lease and the fencing token.
    assert store.upload(make_checkpoint(tmp_path, 9), 9, lease=stale) is UploadOutcome.NOT_PUBLISHED
    assert not store.publish(9, lease=stale)
    assert store.latest_step() == 3
    assert store.get_json("latest.json")["lease_token"] == successor.token  # type: ignore[index]


def test_lower_fencing_token_is_refused_even_with_a_newer_step(s3: Any, bucket: str, tmp_path: Path) -> None:
    """A holder whose own lease check raced a takeover still cannot publish over the successor."""
    store = small_part_store(bucket, "job")
    earlier = Lease(s3, bucket, "job", owner="i-old", ttl_seconds=60)
    assert earlier.acquire()
    earlier.release()
    successor = Lease(s3, bucket, "job", owner="i-new", ttl_seconds=60)
    assert successor.acquire() and successor.token > earlier.token
    assert store.upload(make_checkpoint(tmp_path, 2), 2, lease=successor) is UploadOutcome.PUBLISHED
    refusal = store.publish_refusal(8, store.read_latest()[0], earlier)
    assert refusal.startswith("a newer lease holder")


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_publishers_leave_the_newest_step(s3: Any, bucket: str, round_: int) -> None:
    store = RemoteStore(s3, bucket, f"pub-{round_}")
    results = race(*(lambda step=step: store.publish(step) for step in (11, 12, 13, 14)))
    assert store.latest_step() == 14
    assert results[-1] is True


def test_unreadable_lease_is_reported_not_taken(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="job/lease.json", Body=b"{not json")
    with pytest.raises(LeaseError, match="job/lease.json is not a valid lease"):
        Lease(s3, bucket, "job", owner="i-1").acquire()


def test_a_renewal_in_flight_never_makes_the_holder_doubt_its_own_lease(s3: Any, bucket: str) -> None:
    """The agent renews from a thread while the publisher asks S3 whether the lease is still ours (an
    emergency checkpoint being published): the holder must never see its own renewal as a takeover."""
    lease = Lease(s3, bucket, "busy", owner="i-1", ttl_seconds=60)
    assert lease.acquire()
    stop = threading.Event()

    def renew_without_pause() -> None:
        while not stop.is_set():
            assert lease.renew()

    renewer = threading.Thread(target=renew_without_pause)
    renewer.start()
    try:
        answers = [lease.still_ours() for _ in range(150)]
    finally:
        stop.set()
        renewer.join()
    assert answers.count(False) == 0


def test_a_lease_nobody_renews_is_taken_after_one_ttl_whatever_expiry_it_names(s3: Any, bucket: str) -> None:
    clock = ManualClock()
    job = "far-future"
    s3.put_object(Bucket=bucket, Key=f"{job}/lease.json",
                  Body=b'{"owner": "i-dead", "token": 7, "expires_at": 99999999999, "written_at": 0}')
    lease = Lease(s3, bucket, job, owner="i-new", ttl_seconds=30, clock=clock)
    assert not lease.acquire()
    assert lease.held_by is not None and lease.held_by.owner == "i-dead"  # named in the agent's log line
    clock.advance(29)
    assert not lease.acquire()
    clock.advance(2)
    assert lease.acquire() and lease.token == 8


def test_nodes_racing_to_record_the_same_thing_create_it_exactly_once(s3: Any, bucket: str) -> None:
    for round_ in range(5):
        stores = [RemoteStore(s3, bucket, f"once-{round_}", instance=f"i-{n}") for n in range(3)]
        created = race(*(lambda store=store: store.create_once("stop.json", {"by": store.instance})
                         for store in stores))
        assert created.count(True) == 1, created
        assert stores[0].get_json("stop.json") == {"by": stores[created.index(True)].instance}
