"""`python -m spot_trainer status` shows what the job has cost, and `--json` gives status and cost as one object."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from spot_trainer.__main__ import main
from spot_trainer.storage.steps.remote import RemoteStore
from tests.support.job_history import write_until_paused, written_job


@pytest.fixture
def job(monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteStore]:
    for name in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        now = time.time()  # the records are written relative to the moment the test runs
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="costs")
        store = RemoteStore(s3, "costs", "cifar")
        store.put_json("status.json", {"job": "cifar", "state": "TRAINING", "step": 700})
        store.put_json("instances/i-old.json", {
            "instance": "i-old", "type": "g5.xlarge", "az": "us-east-1a", "market": "spot",
            "launched_at": now - 7200, "last_seen": now - 3600, "stopped_at": None, "step": 600})
        store.put_json("instances/i-new.json", {
            "instance": "i-new", "type": "g5.xlarge", "az": "us-east-1a", "market": "on-demand",
            "launched_at": now - 1800, "last_seen": now - 10, "stopped_at": None, "step": 700})
        store.put_json("events/1.json", {"kind": "start", "instance": "i-old", "epoch": now - 7000})
        store.put_json("events/2.json", {"kind": "start", "instance": "i-new", "epoch": now - 1700})
        store.put_json("events/3.json", {"kind": "resume", "instance": "i-new", "epoch": now - 1690, "step": 500})
        yield store


def test_the_status_shows_the_cost_section(job: RemoteStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--job", "cifar", "--bucket", "costs", "--region", "us-east-1"]) == 0
    out = capsys.readouterr().out
    assert "state          TRAINING" in out
    # i-old lost power an hour ago (billed to its last beat); i-new runs on demand, counted to now.
    assert "instance-hours 1.50 on 2 instances (1.00 spot, 0.50 on-demand; 1 still running, counted to now)" in out
    assert "on-demand      $1.51 for the same hours at on-demand prices" in out
    # i-old stopped beating without a clean stop and i-new took over: a lost instance, counted.
    assert "interruptions  1: 0 with a notice, 1 power-off" in out
    assert ("  i-old        power-off, last seen " in out and "its record: step 600; the next round resumed from "
            "step 500: at least 100 steps redone" in out)
    # i-old's power-off hides what it ran after its last heartbeat: the redone work is a floor.
    assert "redone work    at least 100 of 800 steps computed were computed again" in out
    assert "prices         spot: EC2 spot price history" in out


def test_json_is_status_and_cost_in_one_object(job: RemoteStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--job", "cifar", "--bucket", "costs", "--region", "us-east-1", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["state"] == "TRAINING" and document["step"] == 700
    cost = document["cost"]
    assert cost["instance_hours"] == pytest.approx(1.5, abs=0.01) and cost["redone_steps"] == 100
    assert [i["ended_by"] for i in cost["instances"]] == ["running", "last seen"]
    assert cost["on_demand_instances_usd"] == pytest.approx(0.5 * 1.006, abs=0.01)


def test_an_unreadable_price_history_is_one_line_and_the_rest_still_prints(
        job: RemoteStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--job", "cifar", "--bucket", "costs"]) == 0  # no region: EC2 prices are per region
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if line.startswith("note")]
    assert len(notes) == 1 and "cannot read the EC2 spot price history" in notes[0] and "--region" in notes[0]
    assert "state          TRAINING" in out and "1 of 2 instances not priced" in out


@pytest.fixture
def lived(monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteStore]:
    """A finished job that lived through a notice, a power-off, a pause and a resume (support/job_history.py)."""
    with written_job("lived", monkeypatch) as store:
        yield store


def test_status_counts_every_lost_instance_and_says_what_each_cost(lived: RemoteStore,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--job", "cnn", "--bucket", "lived", "--region", "us-east-1"]) == 0
    out = capsys.readouterr().out
    assert "state          DONE" in out and "PAUSED" not in out and "scale-in" not in out
    # The demo's count: i-a's notice and i-b's power-off; i-c's stop was the pause.
    assert "interruptions  2: 1 with a notice, 1 power-off; 1 stop(s) by a pause not counted" in out
    assert "saved step 180; its record: step 180; the next round resumed from step 180; no redone step seen" in out
    assert ("  i-b          power-off, last seen 2026-09-21T14:21:40+00:00; its record: step 340, checkpoint 320 on "
            "its disk; the next round resumed from step 300: at least 40 steps redone") in out
    assert "redone work    at least 40 of " in out


def test_a_paused_job_reads_paused_through_the_command(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with written_job("paused", monkeypatch, write_until_paused):
        assert main(["status", "--job", "cnn", "--bucket", "paused", "--region", "us-east-1"]) == 0
    out = capsys.readouterr().out
    assert "state          PAUSED" in out and "reason         paused at 2026-09-21T14:24:20+00:00" in out
    assert "INTERRUPTED" not in out and "scale-in" not in out
    assert "interruptions  2: 1 with a notice, 1 power-off; 1 stop(s) by a pause not counted" in out


def test_json_tells_the_same_state_and_interruptions_as_the_text(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    with written_job("paused", monkeypatch, write_until_paused):
        assert main(["status", "--job", "cnn", "--bucket", "paused", "--region", "us-east-1", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["state"], document["interruptions"]) == ("PAUSED", 2)
    assert "scale-in" not in document["reason"]
