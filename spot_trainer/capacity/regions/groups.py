"""A region's group as the controller reads and sets it, through boto3's Auto Scaling client of that
region: the instances running, the launches failed since the last one that succeeded, and a move
(the old group to 0 first, so that two regions never train at once, then the new one to N)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .observations import RegionObservation, failures_since_success, paged_activities


class GroupClient(Protocol):
    """The Auto Scaling calls this needs, on the job's own groups."""

    def describe_auto_scaling_groups(self, *, AutoScalingGroupNames: list[str]) -> Any: ...

    def set_desired_capacity(self, *, AutoScalingGroupName: str, DesiredCapacity: int,
                             HonorCooldown: bool) -> Any: ...

    def get_paginator(self, operation_name: str) -> Any: ...


@dataclass(frozen=True)
class RegionGroup:
    region: str
    name: str
    client: GroupClient


def desired_capacity(group: RegionGroup) -> int | None:
    """How many instances the group wants; None where the region has no such group (its stack not deployed)."""
    found = group.client.describe_auto_scaling_groups(AutoScalingGroupNames=[group.name])["AutoScalingGroups"]
    return int(found[0]["DesiredCapacity"]) if found else None


def set_back(group: RegionGroup) -> None:
    """A group that is not the job's active one wants no instance."""
    group.client.set_desired_capacity(AutoScalingGroupName=group.name, DesiredCapacity=0, HonorCooldown=False)


def running_instances(group: RegionGroup) -> int:
    """Instances InService and Healthy: launched and not on their way out."""
    found = group.client.describe_auto_scaling_groups(AutoScalingGroupNames=[group.name])["AutoScalingGroups"]
    if not found:
        raise LookupError(f"no Auto Scaling group {group.name} in {group.region}")
    return sum(1 for instance in found[0].get("Instances", [])
               if instance.get("LifecycleState") == "InService" and instance.get("HealthStatus") == "Healthy")


def observe(group: RegionGroup, *, idle_since: float | None, score: int | None,
            spot_price: float | None) -> RegionObservation:
    """The region as the move rule reads it; `idle_since` is the caller's record of when it last ran none."""
    running = running_instances(group)
    return RegionObservation(group.region, running=running, idle_since=None if running else idle_since,
                             failures=failures_since_success(paged_activities(group.client, group.name)),
                             score=score, spot_price=spot_price)


def move(source: RegionGroup, target: RegionGroup, nodes: int) -> None:
    """The old group to 0, then the new one to `nodes`."""
    set_back(source)
    target.client.set_desired_capacity(AutoScalingGroupName=target.name, DesiredCapacity=nodes, HonorCooldown=False)
