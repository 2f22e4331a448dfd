"""A job of two regions written into the local AWS's buckets the way its agents and the regions controller write
them, each record at a chosen moment:

    us-east-1 (home)  i-home  spot  T0 → stopped T0+300       published step 100 at T0+200; notice at T0+290, saved 120
    the controller    T0+400  moved the job to eu-west-1      its event and regions.json, in home's bucket
    eu-west-1         i-away  spot  T0+450 → stopped T0+700   restored step 120 from us-east-1 at T0+470 (48 MB
                                                              crossed); published 180 at T0+600; done at 200, T0+690
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from spot_trainer.aws_names import regional_bucket_name
from spot_trainer.capacity.regions.moves import Move
from spot_trainer.capacity.regions.place_record import RECORD_NAME, PlaceRecord, RegionSeen
from spot_trainer.storage.s3 import job_records
from tests.support.job_history import T0, History

HOME, AWAY = "us-east-1", "eu-west-1"
ACCOUNT = "123456789012"  # moto's
MOVED_AT, RESTORED_AT = T0 + 400, T0 + 470
REASON = "no instance has run in us-east-1 for 1m; moving to eu-west-1 (placement score 9)"
CROSSED_BYTES = 48_000_000
ENDS = {"i-home": T0 + 300, "i-away": T0 + 700}


@dataclass(frozen=True)
class TwoRegions:
    job: str
    buckets: dict[str, str]  # home first


def write_two_regions(s3_in: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch) -> TwoRegions:
    """The job's buckets made and its records written; `s3_in(region)` is an S3 client of that region."""
    job = f"r{uuid.uuid4().hex[:8]}"
    buckets = {region: regional_bucket_name(job, region, ACCOUNT) for region in (HOME, AWAY)}
    for region, bucket in buckets.items():
        s3_in(region).create_bucket(Bucket=bucket, **({} if region == "us-east-1" else {
            "CreateBucketConfiguration": {"LocationConstraint": region}}))
    home, away = (History(s3_in(region), buckets[region], job, monkeypatch) for region in (HOME, AWAY))
    home.instance("i-home", "spot", T0, T0 + 300, stopped=True, step=120)
    home.event("i-home", T0 + 10, "start", attempt=1)
    home.event("i-home", T0 + 200, "checkpoint", step=100, published=True)
    home.event("i-home", T0 + 290, "interruption", reason="spot interruption notice", step=120)
    home.status(state="INTERRUPTED", step=120, instance="i-home", updated_at="2026-09-21T14:18:10Z")
    home.event("regions-controller", MOVED_AT, "region", **{"from": HOME, "to": AWAY, "reason": REASON})
    away.instance("i-away", "spot", T0 + 450, T0 + 700, stopped=True, step=200, az=f"{AWAY}a")
    away.event("i-away", T0 + 460, "start", attempt=2)
    away.event("i-away", RESTORED_AT, "region_restore", step=120, region=HOME, bytes=CROSSED_BYTES)
    away.event("i-away", RESTORED_AT + 1, "resume", step=120)
    away.event("i-away", T0 + 600, "checkpoint", step=180, published=True)
    away.event("i-away", T0 + 690, "done", step=200)
    away.status(state="DONE", step=200, instance="i-away", updated_at="2026-09-21T14:25:00Z")
    place = PlaceRecord(active=AWAY, active_since=MOVED_AT, moves=(Move(MOVED_AT, HOME, AWAY, REASON),),
                        reason=f"stays in {AWAY}: an instance runs",
                        regions={HOME: RegionSeen(0, 0, 2, "", buckets[HOME]),
                                 AWAY: RegionSeen(1, 0, 9, "", buckets[AWAY])})
    s3_in(HOME).put_object(Bucket=buckets[HOME], Key=f"{job}/{RECORD_NAME}", Body=place.to_json())
    monkeypatch.setattr(job_records, "time", time)  # the records are written: time is the real one again
    return TwoRegions(job, buckets)
