"""The demo's --outage and --score, checked against the regions the deployed job lists, as a plan on the board
moto answers from (localcloud/region_capacity.py); and the link between regions (--cross-region-latency-ms,
--cross-region-mbps), which the region proxies play (localcloud/region_proxy.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from localcloud.cloud import Deployment
from localcloud.interruptions import PlanError
from localcloud.region_capacity import RegionOutage, RegionPlan, parse_region_outage, parse_region_score
from localcloud.region_link import INSTANCE_CROSS_REGION_MBPS, CrossRegionLink, LinkError


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


def add_link_flags(parser: argparse.ArgumentParser) -> None:
    """How far apart the job's regions are: for a job of several regions, what crossing them costs."""
    parser.add_argument("--cross-region-latency-ms", type=float, default=None, metavar="MS",
                        help="a job of several regions: the round trip of a request to another region's bucket or "
                             "API (default: each pair's average in a public survey, 80-137 ms)")
    parser.add_argument("--cross-region-mbps", type=float, default=INSTANCE_CROSS_REGION_MBPS, metavar="MBPS",
                        help="a job of several regions: megabits per second of each instance's traffic to other "
                             f"regions (default {INSTANCE_CROSS_REGION_MBPS:g}, EC2's bound below 32 vCPUs)")


def cross_region_link(options: argparse.Namespace) -> CrossRegionLink:
    """The link the flags give, or their one line."""
    try:
        return CrossRegionLink(options.cross_region_latency_ms, options.cross_region_mbps)
    except LinkError as error:
        raise PlanError(str(error)) from None
