"""A job of several regions at a start: the job's buckets in its other regions, where a newer step than this
region's bucket holds may lie (the job trained there before it moved here). It is restored from there once,
across regions; the saves that follow go to this region's bucket, so a later start here finds them at home."""

from __future__ import annotations

from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from ..storage.steps.remote import RemoteStore, RemoteStoreError


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
