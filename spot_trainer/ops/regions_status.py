"""`status` of a job of several regions: where the regions controller has put it, what it saw of each region
(instances wanted and running, placement score, the newest failed launch), and every move with its time and
reason, from `<job>/regions.json` in home's bucket. The job's own record is read where the job runs."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..aws_names import bucket_name_problem
from ..capacity.regions.place_record import RECORD_NAME, PlaceRecord
from .job_stack import JobStack


def read_place(s3: Any, bucket: str, job: str) -> PlaceRecord | None:
    """The controller's record; None for a job of one region (none is written), or where S3 does not answer:
    the job's own record is read next, and says in one line what is wrong with the bucket or the job."""
    if bucket_name_problem(bucket):
        return None
    try:
        body = s3.get_object(Bucket=bucket, Key=f"{job}/{RECORD_NAME}")["Body"].read()
    except (ClientError, BotoCoreError):
        return None
    try:
        return PlaceRecord.from_json(body)
    except ValueError as error:
        print(f"spot-trainer: {error}: the regions are not shown", flush=True)
        return None


def where_it_runs(home: JobStack, place: PlaceRecord | None) -> JobStack:
    """The job as its active region holds it (its bucket and group there); home's for a job of one region."""
    seen = place.regions.get(place.active) if place is not None else None
    if place is None or seen is None or not seen.bucket or place.active == home.region:
        return home
    return replace(home, region=place.active, bucket=seen.bucket)


def region_lines(place: PlaceRecord) -> list[str]:
    lines = [f"regions        active {place.active} since {_utc(place.active_since)}; {place.reason}"]
    for region, seen in place.regions.items():
        score = "unknown" if seen.score is None else str(seen.score)
        failure = f", last failed launch {seen.failure}" if seen.failure else ""
        lines.append(f"  {region:<14} wants {seen.desired}, runs {seen.running}, placement score {score}{failure}")
    lines += [f"  moved {move.source} → {move.target} at {_utc(move.at)}: {move.reason}" for move in place.moves]
    return lines


def _utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
