"""Uploads that keep failing, as the user meets them: status.json's warning with the cause, one event
and one notification per cause, and the warning taken back (only its own) once an upload works."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from spot_trainer.agent.records.notify import Notifier
from spot_trainer.agent.records.status import JobStatus, StatusReporter
from spot_trainer.agent.records.telemetry import RunTelemetry
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.steps.upload_health import UploadHealth


class Topic:
    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []

    def publish(self, *, TopicArn: str, Subject: str, Message: str) -> Any:  # noqa: N803  (boto3's names)
        self.sent.append({"Subject": Subject, "Message": Message})


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RunTelemetry, Topic]]:
    credentials = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="ckpt")
        topic = Topic()
        telemetry = RunTelemetry(store=RemoteStore(s3, "ckpt", "lm", instance="i-1"), cloud=None)
        telemetry.reporter = StatusReporter(JobStatus("lm"), publish=lambda record: None)
        telemetry.notifier = Notifier("arn:aws:sns:us-east-1:1:t", topic, "lm", telemetry.log)
        yield telemetry, topic


def test_a_cause_is_said_in_status_once_in_the_events_and_once_on_the_topic(
    said: tuple[RunTelemetry, Topic]
) -> None:
    telemetry, topic = said
    health = UploadHealth(telemetry.upload_warning)
    for step in (10, 20, 30):
        health.failed(step, "S3 answered AccessDenied", urgent=False)
    assert telemetry.reporter is not None
    assert telemetry.reporter.status.warning.startswith("checkpoint uploads are failing: S3 answered AccessDenied")
    events = telemetry.store.events("upload_failing")
    assert [(event["cause"], event["step"]) for event in events] == [("S3 answered AccessDenied", 20)]
    assert [message["Subject"] for message in topic.sent] == ["Spot Trainer lm: checkpoints not reaching S3"]
    assert "S3 answered AccessDenied" in topic.sent[0]["Message"] and "i-1" in topic.sent[0]["Message"]


def test_an_upload_that_works_again_takes_back_its_own_warning_only(said: tuple[RunTelemetry, Topic]) -> None:
    telemetry, _ = said
    assert telemetry.reporter is not None
    health = UploadHealth(telemetry.upload_warning)
    health.failed(10, "S3 answered SlowDown", urgent=True)
    health.succeeded(20)
    assert telemetry.reporter.status.warning == ""
    health.failed(30, "S3 answered SlowDown", urgent=True)
    telemetry.warn("the command saves nothing recognisable")  # another room's warning, said since
    health.succeeded(40)
    assert telemetry.reporter.status.warning == "the command saves nothing recognisable"
