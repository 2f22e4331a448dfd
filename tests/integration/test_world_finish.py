"""A node told to leave after a peer finished the job (or gave up on it) records the job DONE (or
FAILED, with the peer's reason), not interrupted, even when its own pending progress was published over
the peer's record a moment before (every node writes the one status record). The peer's event decides,
against moto's S3."""

from __future__ import annotations

import threading
import time
from typing import Any

from spot_trainer.agent.fatal import record_failed
from spot_trainer.agent.instance.config import AgentConfig
from spot_trainer.agent.instance.imds import ImdsClient
from spot_trainer.agent.records.status import DONE, STATUS_NAME, TRAINING
from spot_trainer.agent.several_nodes.world import World
from spot_trainer.storage.steps.remote import RemoteStore


def node(s3: Any, bucket: str, instance: str) -> World:
    store = RemoteStore(s3, bucket, "job", instance=instance)
    config = AgentConfig(job="job", bucket=bucket, command="builtin", train_args="--steps 10")
    return World(config, store, ImdsClient("http://127.0.0.1:9"), threading.Event(), print)


def test_a_peers_done_event_ends_the_job_even_under_a_later_training_status(s3: Any, bucket: str) -> None:
    started = time.time()
    leaving, finisher = node(s3, bucket, "i-leaving"), node(s3, bucket, "i-finisher")
    assert leaving.ended_by_a_peer(started) is None  # a scale-in now would be a real interruption
    finisher.store.put_json(STATUS_NAME, {"state": DONE})
    finisher.store.append_event("done", step=150)
    leaving.store.put_json(STATUS_NAME, {"state": TRAINING, "step": 150})  # its progress, published late
    assert (leaving.ended_by_a_peer(started) or {}).get("kind") == "done"


def test_a_peer_that_gave_up_leaves_its_reason_for_the_others_to_record(s3: Any, bucket: str) -> None:
    started = time.time()
    leaving, failing = node(s3, bucket, "i-leaving"), node(s3, bucket, "i-failing")
    reason = "command exited with code 2: No module named 'mylib'"
    record_failed(failing.store, reason)
    leaving.store.put_json(STATUS_NAME, {"state": TRAINING})
    ending = leaving.ended_by_a_peer(started) or {}
    assert (ending.get("kind"), ending.get("reason")) == ("failed", reason)


def test_a_done_event_from_before_this_agent_started_is_an_earlier_run_of_the_job(s3: Any, bucket: str) -> None:
    earlier = node(s3, bucket, "i-earlier")
    earlier.store.append_event("done", step=40)
    earlier.store.append_event("interruption", step=10)
    time.sleep(0.01)
    started = time.time()
    assert node(s3, bucket, "i-new").ended_by_a_peer(started) is None
    assert [event["kind"] for event in earlier.store.events(since=started - 60)] == ["done", "interruption"]


def test_a_peers_done_status_seen_before_its_event_still_names_the_published_step(s3: Any, bucket: str) -> None:
    """Every node writes the one status record and the finisher's event may land a moment later: the
    step a leaving node names comes from the record then, not from nowhere."""
    started = time.time()
    leaving, finisher = node(s3, bucket, "i-leaving"), node(s3, bucket, "i-finisher")
    finisher.store.put_json(STATUS_NAME, {"state": DONE, "checkpoint_step": 300})
    ending = leaving.ended_by_a_peer(started) or {}
    assert (ending.get("kind"), ending.get("step")) == ("done", 300)
