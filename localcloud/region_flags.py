"""The demo's --outage and --score, checked against the regions the deployed job lists, as a plan on the board
moto answers from (localcloud/region_capacity.py)."""

from __future__ import annotations

from pathlib import Path

from localcloud.cloud import Deployment
from localcloud.interruptions import PlanError
from localcloud.region_capacity import RegionOutage, RegionPlan, parse_region_outage, parse_region_score


def region_flags(outages: list[str], scores: list[str]) -> tuple[list[RegionOutage], dict[str, int]]:
    """--outage REGION:START:LEN and --score REGION:SCORE, each read or refused in one line."""
    return [parse_region_outage(text) for text in outages], dict(parse_region_score(text) for text in scores)


def region_plan(board: Path, deployment: Deployment, outages: list[RegionOutage],
                scores: dict[str, int]) -> RegionPlan | None:
    """The regions' capacity plan on the board moto answers from; a region the job does not list is one line."""
    if not outages and not scores:
        return None
    listed = [place.region for place in deployment.every_region()]
    for region in [outage.region for outage in outages] + list(scores):
        if region not in listed or not deployment.others:
            raise PlanError(f"--outage/--score {region}: job {deployment.job} trains in {', '.join(listed)} "
                            "(capacity.regions lists the regions a job may move between)")
    return RegionPlan(outages, scores, board)
