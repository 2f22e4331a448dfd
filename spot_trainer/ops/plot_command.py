"""`status --plot FILE.svg`: the job's records read once more and drawn (job_story.py, job_plot.py); for a job of
several regions, every region's bucket is read and the regions drawn too (region_story.py, region_plot.py)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from ..agent.records.status import STATUS_NAME
from ..capacity.regions.place_record import PlaceRecord
from ..costs.instance_records import read_records
from ..costs.job_cost import stored_job_cost
from ..costs.spot_prices import RegionalPrices, SpotPriceSource
from ..storage.steps.remote import RemoteStore
from .aws_access import aws_errors, client
from .job_plot import draw
from .job_stack import JobStack
from .job_story import story_of
from .problem import JobProblem
from .region_plot import size_text
from .region_story import RegionRecords, RegionsStory, regions_story

# A job of several regions: each region (home first) and the store of its bucket, None where no record names it.
RegionStores = Mapping[str, RemoteStore | None]


def check_plot_path(path: Path) -> None:
    """Before anything is read: a name a browser opens as a picture, in a folder that exists."""
    if path.suffix.lower() != ".svg":
        raise JobProblem(f"--plot {path}: give a file name ending in .svg (one standalone picture)")
    if not path.parent.is_dir():
        raise JobProblem(f"--plot {path}: there is no folder {path.parent} to write it into")


def write_plot(job: JobStack, path: Path, place: PlaceRecord | None = None) -> str:
    """`place`: the regions controller's record of a job of several regions (None for a job of one)."""
    from ..agent.cli import spot_prices  # EC2's price history, as status itself reads it

    store = RemoteStore(client("s3", job.region or None), job.bucket, job.job, instance="user")
    prices = spot_prices(job.region or None)
    stores: dict[str, RemoteStore | None] | None = None
    if place is not None:
        stores = {region: store if region == job.region else
                  RemoteStore(client("s3", region), seen.bucket, job.job, instance="user") if seen.bucket else None
                  for region, seen in place.regions.items()} or {job.region: store}
        prices = RegionalPrices({region: spot_prices(region) for region in stores if region != job.region}, prices)
    with aws_errors(f"cannot read job {job.job!r} in bucket {job.bucket!r}"):
        return plot_job(store, prices, path, regions=stores)


def plot_job(store: RemoteStore, prices: SpotPriceSource, path: Path, *, regions: RegionStores | None = None) -> str:
    """Read the job's records, draw them into `path`, and say in a line what the picture holds. `store`: the bucket
    of the region the job runs in (its status record); `regions`: a job of several regions, every region's."""
    status = store.read_record(STATUS_NAME) or {}
    buckets = [store] if regions is None else [each for each in regions.values() if each is not None]
    if store.bucket not in {each.bucket for each in buckets}:
        buckets.insert(0, store)
    read = {each.bucket: RegionRecords(each.events(), read_records(each)[0]) for each in buckets}
    events = read[store.bucket].events if regions is None else sorted(
        (e for each in read.values() for e in each.events), key=lambda e: e.get("epoch") or 0)
    lives = [life for each in read.values() for life in each.lives]
    cost = stored_job_cost(store, events, status.get("state"), prices, now=time.time(),
                           elsewhere=[each for each in buckets if each.bucket != store.bucket])
    story = story_of(store.job, events, lives, cost.instances, status, cost.losses)
    places = None if regions is None else regions_story(
        tuple(regions), {region: read[each.bucket] for region, each in regions.items() if each is not None})
    draw(story, path, places)
    losses = cost.losses
    return (f"plot: {path}: {len(story.bars)} instance(s), {len(losses.lost)} interruption(s) ({losses.notices} "
            f"with a notice, {losses.power_offs} power-off(s)), up to step {_or_none(story.last_step)}"
            f"{_regions_told(places)}")


def _regions_told(places: RegionsStory | None) -> str:
    if places is None:
        return ""
    path = " → ".join(stay.region for stay in places.stays) or "no record yet"
    known = [c.bytes for c in places.crossings if c.bytes is not None]
    moved = size_text(sum(known)) if len(known) == len(places.crossings) else f"at least {size_text(sum(known))}"
    return (f"; regions {path} ({len(places.moves)} move(s)), {moved} restored across regions in "
            f"{len(places.crossings)} start(s)")


def _or_none(step: int | None) -> str:
    return "none yet" if step is None else str(step)
