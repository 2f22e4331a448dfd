"""The demo's picture of the job's life (spot_trainer/ops/job_plot.py), beside its report: from every region's bucket
for a job of several regions, with its status record from the region it last ran in."""

from __future__ import annotations

from pathlib import Path

from localcloud.cloud import Deployment, LocalCloud
from spot_trainer.agent.records.status import STATUS_NAME
from spot_trainer.costs.spot_prices import SpotPriceSource
from spot_trainer.ops.plot_command import plot_job
from spot_trainer.ops.problem import JobProblem
from spot_trainer.storage.steps.remote import RemoteStore


def draw_life(cloud: LocalCloud, deployment: Deployment, path: Path, prices: SpotPriceSource) -> str:
    """The picture written to `path` and its line, or why there is none."""
    stores = {place.region: RemoteStore(cloud.client("s3", place.region), place.bucket, place.job, instance="demo")
              for place in deployment.every_region()}
    last_ran = max(stores.values(), key=lambda store: str((store.read_record(STATUS_NAME) or {}).get("updated_at", "")))
    try:
        return plot_job(last_ran, prices, path, regions=stores if deployment.others else None)
    except JobProblem as problem:  # no matplotlib: the report stands without its picture
        return f"no picture of the job's life: {problem}"
