"""One job's life written into S3 the way its agents and the user's commands write it (RemoteStore.append_event,
InstanceRecord), each at a chosen moment: a spot notice, a power-off, a pause and a resume, then the end.

    i-a  spot       T0 → stopped T0+210     notice at T0+200, saved step 180
    i-b  spot       T0+250 → last beat T0+500, no stop: a power-off (record: step 340, checkpoint 320 on disk)
    i-c  on-demand  T0+550 → stopped T0+675  resumed from 300; `pause` at T0+660, its stop at T0+670 (step 420)
    `resume` at T0+800
    i-d  spot       T0+810 → stopped T0+850  resumed from 420, done at step 500 at T0+845 (40 s: EC2 bills 60)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from spot_trainer.agent.records.instance_record import InstanceFacts, InstanceRecord
from spot_trainer.storage.s3 import job_records
from spot_trainer.storage.steps.remote import RemoteStore

T0 = 1_790_000_000.0
HEARTBEAT = 2.0
ENDS = {"i-a": T0 + 210, "i-b": T0 + 500, "i-c": T0 + 675, "i-d": T0 + 850}  # each instance's measured end
POWER_OFF_AT = T0 + 500  # i-b's last heartbeat: its last sign of life
PAUSED_AT, RESUMED_AT = T0 + 660, T0 + 800


class History:
    def __init__(self, s3: Any, bucket: str, job: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.s3, self.bucket, self.job, self.monkeypatch = s3, bucket, job, monkeypatch

    def store(self, who: str) -> RemoteStore:
        return RemoteStore(self.s3, self.bucket, self.job, instance=who)

    def event(self, who: str, at: float, kind: str, **fields: Any) -> None:
        self.monkeypatch.setattr(job_records, "time", SimpleNamespace(time=lambda: at))
        self.store(who).append_event(kind, **fields)

    def instance(self, iid: str, market: str, launched: float, seen: float, *, stopped: bool, step: int | None,
                 on_disk: int | None = None, az: str = "us-east-1a") -> None:
        """The record an agent keeps: written at launch, beating until `seen`, stopped there when `stopped`."""
        clock = [launched]
        record = InstanceRecord(self.store(iid), InstanceFacts(iid, "g5.xlarge", az, market, launched),
                                clock=lambda: clock[0], step=lambda: step, checkpoint=lambda: on_disk)
        record.heartbeat_seconds = HEARTBEAT
        record.beat()
        clock[0] = seen
        if stopped:
            record.stop()
        else:
            record.beat()

    def status(self, **fields: Any) -> None:
        self.store("user").put_json("status.json", {"job": self.job, **fields})


def write_until_paused(history: History) -> None:
    """The job up to its pause: i-c has stopped for it and recorded INTERRUPTED, as every agent does."""
    event = history.event
    history.instance("i-a", "spot", T0, T0 + 210, stopped=True, step=180)
    event("i-a", T0 + 10, "start", attempt=1)
    event("i-a", T0 + 100, "checkpoint", step=100, published=True)
    event("i-a", T0 + 200, "interruption", reason="spot interruption notice", step=180)
    history.instance("i-b", "spot", T0 + 250, POWER_OFF_AT, stopped=False, step=340, on_disk=320)
    event("i-b", T0 + 260, "start", attempt=2)
    event("i-b", T0 + 270, "resume", step=180)
    event("i-b", T0 + 400, "checkpoint", step=300, published=True)
    history.instance("i-c", "on-demand", T0 + 550, T0 + 675, stopped=True, step=420)
    event("i-c", T0 + 560, "start", attempt=3)
    event("i-c", T0 + 570, "resume", step=300)
    event("i-c", T0 + 650, "checkpoint", step=400, published=True)
    event("user", PAUSED_AT, "paused", nodes=1)
    event("i-c", T0 + 670, "interruption", reason="scale-in (lifecycle Terminated)", step=420)
    history.status(state="INTERRUPTED", reason="scale-in (lifecycle Terminated)", step=420, interruptions=2,
                   instance="i-c", budget_usd=40.0)


def write_whole_life(history: History) -> None:
    write_until_paused(history)
    history.event("user", RESUMED_AT, "resumed", nodes=1)
    history.instance("i-d", "spot", T0 + 810, T0 + 850, stopped=True, step=500)
    history.event("i-d", T0 + 815, "start", attempt=4)
    history.event("i-d", T0 + 820, "resume", step=420)
    history.event("i-d", T0 + 840, "checkpoint", step=500, published=True)
    history.event("i-d", T0 + 845, "done", step=500)
    history.status(state="DONE", step=500, interruptions=3, instance="i-d", budget_usd=40.0)


@contextmanager
def written_job(bucket: str, monkeypatch: pytest.MonkeyPatch,
                write: Callable[[History], None] = write_whole_life) -> Iterator[RemoteStore]:
    """The job `cnn` written into a moto bucket; the store a user's command reads it with."""
    for name in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)
        history = History(s3, bucket, "cnn", monkeypatch)
        write(history)
        monkeypatch.setattr(job_records, "time", time)  # the records are written: time is the real one again
        yield history.store("user")
