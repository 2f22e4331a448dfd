"""A job of several regions at a start: the job's buckets in its other regions, where a newer step than this
region's bucket holds may lie (the job trained there before it moved here). It is restored from there once,
across regions; the saves that follow go to this region's bucket, so a later start here finds them at home."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from ..s3.job_regions import parse_job_buckets
from ..s3.s3client import s3_client
from .remote import RemoteStore, RemoteStoreError

# What a process the agent starts (torchrun's launcher) is told of the job's regions: region=bucket,…, home first.
JOB_BUCKETS_ENV, REGION_ENV = "SPOT_JOB_BUCKETS", "SPOT_REGION"


@dataclass(frozen=True)
class AwayStep:
    region: str
    store: RemoteStore
    step: int


@dataclass
class OtherRegions:
    stores: dict[str, RemoteStore]  # region → the job's store there

    def newest_above(self, floor: int | None) -> AwayStep | None:
        """The highest published step of another region above `floor` (None: any); one read of each region's
        latest.json. A region that does not answer fails the start (which is retried, as any start S3 does not
        answer): its step may be the newest, and starting without it would train again what it holds."""
        best: AwayStep | None = None
        for region, store in self.stores.items():
            try:
                step = store.latest_step()
            except (RemoteStoreError, BotoCoreError, ClientError) as error:
                raise RemoteStoreError(f"latest.json of {region} (s3://{store.bucket}) could not be read, so the "
                                       f"job's newest step is not known: {error}") from error
            if step is not None and (floor is None or step > floor) and (best is None or step > best.step):
                best = AwayStep(region, store, step)
        return best

    @classmethod
    def from_environment(cls, job: str, env: Mapping[str, str] = os.environ) -> OtherRegions | None:
        """The job's other regions as the agent tells the launcher; None for a job of one region."""
        regions, region = parse_job_buckets(env.get(JOB_BUCKETS_ENV, "")), env.get(REGION_ENV, "")
        if regions is None or not region:
            return None
        session = boto3.session.Session()  # one fetch of the instance role's credentials for every region
        return cls({name: RemoteStore(s3_client(region=name, session=session), bucket, job)
                    for name, bucket in regions.others(region).items()})


@dataclass
class CrossedBytes:
    """The bytes a restore from another region's bucket brought (its transfers' threads report them)."""

    total: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def counting(cls, store: RemoteStore) -> CrossedBytes:
        crossed = cls()
        store.on_download = crossed.add
        return crossed

    def add(self, chunk: int, _whole: int) -> None:
        with self._lock:
            self.total += chunk
