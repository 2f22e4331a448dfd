"""Every agent keeps its instance record fresh in S3 (moto server), stops it cleanly, and meters its spend;
a record it cannot write is a log line, never a stopped agent."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import boto3

from spot_trainer.agent.records.instance_record import InstanceFacts, InstanceRecord
from spot_trainer.costs.instance_records import read_records
from spot_trainer.costs.job_cost import stored_job_cost
from spot_trainer.costs.spend_meter import SpendMeter
from spot_trainer.costs.spot_prices import Ec2SpotPrices, flat_trace
from spot_trainer.storage.steps.remote import RemoteStore

FACTS = InstanceFacts("i-0record", "g5.xlarge", "us-east-1a", "spot", launched_at=time.time() - 30)


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_the_record_appears_is_refreshed_and_stopped(s3: Any, bucket: str) -> None:
    store = RemoteStore(s3, bucket, "rec")
    steps = iter(range(10, 10_000, 10))
    record = InstanceRecord(store, FACTS, step=lambda: next(steps), checkpoint=lambda: 5).start(0.2)
    try:
        first = wait_for(lambda: store.get_json("instances/i-0record.json"))
        assert {k: first[k] for k in ("instance", "type", "az", "market", "launched_at", "stopped_at")} == {
            "instance": "i-0record", "type": "g5.xlarge", "az": "us-east-1a", "market": "spot",
            "launched_at": FACTS.launched_at, "stopped_at": None}
        later = wait_for(lambda: (r := store.get_json("instances/i-0record.json")) and
                         r["last_seen"] > first["last_seen"] and r)
        assert later["step"] > first["step"] and later["heartbeat_seconds"] == 0.2
        assert later["disk_checkpoint_step"] == 5, "what a power-off would lose is bounded by the disk's newest"
    finally:
        record.stop()
    stopped = store.get_json("instances/i-0record.json")
    assert stopped is not None and stopped["stopped_at"] == stopped["last_seen"] >= later["last_seen"]
    time.sleep(0.5)
    assert store.get_json("instances/i-0record.json") == stopped, "no heartbeat after the stop"
    [life], problems = read_records(store)
    assert problems == [] and life.stopped_at == stopped["stopped_at"] and life.instance == "i-0record"
    assert (life.disk_checkpoint_step, life.reached_step) == (5, stopped["step"])


def test_spend_is_reported_each_beat_and_adds_up_to_the_lifetime(s3: Any, bucket: str) -> None:
    store, spent = RemoteStore(s3, bucket, "spend"), list[float]()
    prices = flat_trace({"g5.xlarge": 0.36}, "flat")
    meter = SpendMeter(FACTS.instance_type, FACTS.az, FACTS.market, prices)
    record = InstanceRecord(store, FACTS, meter=meter, on_spend=spent.append).start(0.1)
    wait_for(lambda: len(spent) >= 3)
    record.stop()
    stopped = store.get_json("instances/i-0record.json")
    assert stopped is not None
    assert abs(sum(spent) - (stopped["stopped_at"] - FACTS.launched_at) / 3600 * 0.36) < 1e-9
    cost = stored_job_cost(store, [], "DONE", prices, now=time.time(), minimum_seconds=0)
    assert abs(cost.cost_usd - sum(spent)) < 1e-9, "the meter and the record agree"


def test_an_agent_restarted_on_the_same_instance_does_not_count_its_spend_twice(s3: Any, bucket: str) -> None:
    store, spent = RemoteStore(s3, bucket, "again"), list[float]()
    prices = flat_trace({"g5.xlarge": 3.6}, "flat")
    InstanceRecord(store, FACTS, meter=SpendMeter("g5.xlarge", "us-east-1a", "spot", prices),
                   on_spend=spent.append).start(60).stop()
    first = sum(spent)
    second = InstanceRecord(store, FACTS, meter=SpendMeter("g5.xlarge", "us-east-1a", "spot", prices),
                            on_spend=spent.append).start(60)
    wait_for(lambda: len(spent) >= 2)
    second.stop()
    assert sum(spent) - first < 0.5 * first, "the second agent metered from the first one's stop, not from boot"


def test_spot_prices_from_moto_and_a_bucket_that_is_gone_only_log(aws_env: dict[str, str]) -> None:
    ec2 = boto3.client("ec2", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    lines: list[str] = []
    spent: list[float] = []
    meter = SpendMeter("g5.xlarge", "us-east-1a", "spot", Ec2SpotPrices(ec2))
    record = InstanceRecord(RemoteStore(s3, "no-such-bucket-for-records", "j"), FACTS, meter=meter,
                            on_spend=spent.append, log=lines.append).start(0.1)
    wait_for(lambda: len(spent) >= 3)
    record.stop()
    assert len([line for line in lines if "could not write the instance record" in line]) == 1, lines
    assert spent and all(0 < usd < 0.001 for usd in spent), "moto's flat 0.00001 per hour"
