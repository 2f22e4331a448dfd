"""A spot group's launches as AWS makes them while its region has no spot capacity: none. moto's group starts
every instance it is asked for at once; AWS's fails each spot launch (the failures DescribeScalingActivities
lists, localcloud/moto_regions.py) and keeps trying about once a minute, so the group holds fewer instances
than it wants until capacity is back (https://docs.aws.amazon.com/autoscaling/ec2/userguide/ts-as-capacity.html).

Played only in regions the capacity board names in an outage window: the single-region --spot-outage of the
player (localcloud/outages.py) keeps moto's instances and holds them back itself. A group short of instances
gets them once its region has capacity again, at the next read of the group, as AWS's next try would.
"""

from __future__ import annotations

import os
import time
from typing import Any

from moto.autoscaling.models import AutoScalingBackend, FakeAutoScalingGroup

from localcloud.region_capacity import BOARD_ENV, Board, read_board

_launch = FakeAutoScalingGroup.replace_autoscaling_group_instances
_describe = AutoScalingBackend.describe_auto_scaling_groups


def _spot(group: FakeAutoScalingGroup) -> bool:
    """A mixed-instances group below 100% on-demand (the job's groups); any other group launches on-demand."""
    if not group.mixed_instances_policy:
        return False
    distribution = group.mixed_instances_policy.get("InstancesDistribution", {})
    return int(distribution.get("OnDemandPercentageAboveBaseCapacity", 100)) < 100  # AWS's default: 100


def _played(board: Board, region: str) -> bool:
    return any(window.region == region for window in board.windows)


def launch_unless_no_capacity(self: FakeAutoScalingGroup, count_needed: int, propagated_tags: dict[str, str]) -> None:
    board = read_board(os.environ.get(BOARD_ENV))
    if _spot(self) and not board.has_capacity(self.region, time.time()):
        return  # every spot launch fails; the group stays short of its desired capacity
    _launch(self, count_needed, propagated_tags)


def describe_and_retry(self: AutoScalingBackend, *args: Any, **kwargs: Any) -> Any:
    groups = _describe(self, *args, **kwargs)
    board = read_board(os.environ.get(BOARD_ENV))
    for group in groups:
        short = (group.desired_capacity or 0) - len(group.active_instances())
        launches = not _spot(group) or board.has_capacity(group.region, time.time())
        if short > 0 and _played(board, group.region) and launches:
            group.set_desired_capacity(group.desired_capacity)  # AWS's next try: capacity is back, or on-demand
    return groups


def install() -> None:
    FakeAutoScalingGroup.replace_autoscaling_group_instances = launch_unless_no_capacity  # type: ignore[method-assign]
    AutoScalingBackend.describe_auto_scaling_groups = describe_and_retry  # type: ignore[method-assign]
