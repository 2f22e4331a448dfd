"""The player reads the agents' events from the job's records in S3, each once, by instance, in time order."""

from __future__ import annotations

import json
import time

import boto3
from moto import mock_aws

from localcloud.agent_events import EventFeed
from spot_trainer.storage.s3.job_keys import event_name
from spot_trainer.storage.steps.remote import RemoteStore


def test_each_event_is_read_once_by_the_instance_that_recorded_it() -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="local")
        first, second = (RemoteStore(s3, "local", "demo", instance=name) for name in ("i-1", "i-2"))
        feed = EventFeed(s3, "local", "demo")
        assert feed.new_events() == {}
        first.append_event("fresh_start")
        second.append_event("lease_wait", holder="i-1")
        first.append_event("checkpoint", step=20, published=True)
        s3.put_object(Bucket="local", Key="demo/events/not-json.json", Body=b"{")
        read = feed.new_events()
        assert {name: [event["kind"] for event in events] for name, events in read.items()} == {
            "i-1": ["fresh_start", "checkpoint"], "i-2": ["lease_wait"]}
        assert read["i-1"][1]["step"] == 20 and read["i-1"][0]["epoch"] <= read["i-1"][1]["epoch"]
        assert feed.new_events() == {}
        first.append_event("checkpoint", step=40, published=True)
        assert [event["step"] for event in feed.new_events()["i-1"]] == [40]


def test_an_event_that_lands_after_a_later_stamped_one_is_still_read() -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="local")
        feed, store = EventFeed(s3, "local", "demo"), RemoteStore(s3, "local", "demo", instance="i-1")
        store.append_event("checkpoint", step=20)
        assert [event["step"] for event in feed.new_events()["i-1"]] == [20]
        late = time.time() - 10  # stamped ten seconds ago, its PUT landing only now
        s3.put_object(Bucket="local", Key=f"demo/{event_name(late, 'i-2', 'round')}",
                      Body=json.dumps({"kind": "round", "epoch": late, "instance": "i-2"}).encode())
        assert [event["kind"] for event in feed.new_events()["i-2"]] == ["round"]
