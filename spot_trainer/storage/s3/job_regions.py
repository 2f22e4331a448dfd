"""The regions of a job that lists several (SPOT_JOB_BUCKETS, `region=bucket,…`, home first): where the job's
lease is kept (home's bucket), and the other regions' buckets a start looks in for a newer step than its own
region's bucket holds."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...aws_names import bucket_name_problem

REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")


@dataclass(frozen=True)
class JobRegions:
    buckets: dict[str, str]  # region → the job's bucket there, home first

    @property
    def home(self) -> str:
        return next(iter(self.buckets))

    def others(self, region: str) -> dict[str, str]:
        """Every listed region but `region`, with its bucket."""
        return {name: bucket for name, bucket in self.buckets.items() if name != region}


def parse_job_buckets(text: str) -> JobRegions | None:
    """None for a job of one region (''); ValueError naming the first entry that is not `region=bucket`."""
    if not text.strip():
        return None
    buckets: dict[str, str] = {}
    for entry in text.split(","):
        region, equals, bucket = entry.strip().partition("=")
        if not equals or not REGION.match(region):
            raise ValueError(f"{entry!r} is not region=bucket (like us-west-2=job-123456789012-us-west-2)")
        if problem := bucket_name_problem(bucket):
            raise ValueError(f"{region}: {problem}")
        if region in buckets:
            raise ValueError(f"{region} is named twice")
        buckets[region] = bucket
    return JobRegions(buckets)
