"""A job's bucket in each of two regions, home first, in the S3 stand-in, as the stacks of a job of several
regions make them: what an agent test of such a job starts from."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import boto3

from spot_trainer.storage.steps.remote import RemoteStore

HOME, AWAY = "us-east-1", "us-west-2"


@dataclass(frozen=True)
class RegionBuckets:
    buckets: dict[str, str]  # region → bucket, home first
    clients: dict[str, Any]  # region → its S3 client
    stores: dict[str, RemoteStore]  # region → the job's store there

    @property
    def job_buckets(self) -> str:
        """SPOT_JOB_BUCKETS, as the stacks set it."""
        return ",".join(f"{region}={name}" for region, name in self.buckets.items())


def region_buckets(aws_env: dict[str, str], job: str, name: str) -> RegionBuckets:
    suffix = uuid.uuid4().hex[:8]
    buckets = {HOME: f"{name}-home-{suffix}", AWAY: f"{name}-away-{suffix}"}
    clients = {region: boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name=region)
               for region in buckets}
    clients[HOME].create_bucket(Bucket=buckets[HOME])
    clients[AWAY].create_bucket(Bucket=buckets[AWAY], CreateBucketConfiguration={"LocationConstraint": AWAY})
    return RegionBuckets(buckets, clients, {region: RemoteStore(clients[region], bucket, job)
                                            for region, bucket in buckets.items()})
