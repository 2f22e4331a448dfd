"""`status --plot FILE.svg`: the job's records read once more and drawn (job_story.py, job_plot.py)."""

from __future__ import annotations

import time
from pathlib import Path

from ..agent.records.status import STATUS_NAME
from ..costs.instance_records import read_records
from ..costs.job_cost import stored_job_cost
from ..costs.spot_prices import SpotPriceSource
from ..storage.steps.remote import RemoteStore
from .aws_access import aws_errors, client
from .job_plot import draw
from .job_stack import JobStack
from .job_story import story_of
from .problem import JobProblem


def check_plot_path(path: Path) -> None:
    """Before anything is read: a name a browser opens as a picture, in a folder that exists."""
    if path.suffix.lower() != ".svg":
        raise JobProblem(f"--plot {path}: give a file name ending in .svg (one standalone picture)")
    if not path.parent.is_dir():
        raise JobProblem(f"--plot {path}: there is no folder {path.parent} to write it into")


def write_plot(job: JobStack, path: Path) -> str:
    from ..agent.cli import spot_prices  # EC2's price history, as status itself reads it

    store = RemoteStore(client("s3", job.region or None), job.bucket, job.job, instance="user")
    with aws_errors(f"cannot read job {job.job!r} in bucket {job.bucket!r}"):
        return plot_job(store, spot_prices(job.region or None), path)


def plot_job(store: RemoteStore, prices: SpotPriceSource, path: Path) -> str:
    """Read the job's records, draw them into `path`, and say in a line what the picture holds."""
    status = store.read_record(STATUS_NAME) or {}
    events = store.events()
    lives, _ = read_records(store)
    cost = stored_job_cost(store, events, status.get("state"), prices, now=time.time())
    story = story_of(store.job, events, lives, cost.instances, status, cost.losses)
    draw(story, path)
    losses = cost.losses
    return (f"plot: {path}: {len(story.bars)} instance(s), {len(losses.lost)} interruption(s) ({losses.notices} "
            f"with a notice, {losses.power_offs} power-off(s)), up to step {_or_none(story.last_step)}")


def _or_none(step: int | None) -> str:
    return "none yet" if step is None else str(step)
