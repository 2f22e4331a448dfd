"""A job of several regions at a start: the job's buckets in its other regions, where a newer step than this
region's bucket holds may lie (the job trained there before it moved here). It is restored from there once,
across regions; the saves that follow go to this region's bucket, so a later start here finds them at home."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..storage.steps.remote import RemoteStore, RemoteStoreError


@dataclass(frozen=True)
class AwayStep:
    region: str
    store: RemoteStore
    step: int


@dataclass
class OtherRegions:
    stores: dict[str, RemoteStore]  # region → the job's store there
    log: Callable[[str], None]

    def newest_above(self, floor: int | None) -> AwayStep | None:
        """The highest published step of another region above `floor` (None: any); one read of each region's
        latest.json. A region that does not answer is named and passed over: its step may be older anyway,
        and this region's own checkpoint is still there to resume from."""
        best: AwayStep | None = None
        for region, store in self.stores.items():
            try:
                step = store.latest_step()
            except RemoteStoreError as error:
                self.log(f"latest.json of {region} (s3://{store.bucket}) could not be read: {error}")
                continue
            if step is not None and (floor is None or step > floor) and (best is None or step > best.step):
                best = AwayStep(region, store, step)
        return best
