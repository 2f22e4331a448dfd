"""The market a job's group launches in: spot, or on-demand when a deadline or a capacity drought
calls for it. Only the group's share of on-demand capacity changes; AWS then replaces the running
instances that no longer match (the new one first, the old one through the termination hook)."""

from __future__ import annotations

from typing import Any, Protocol

from .policy import ON_DEMAND, SPOT


class GroupClient(Protocol):
    """The two Auto Scaling calls this needs (the role allows the update on the job's own group only)."""

    def describe_auto_scaling_groups(self, *, AutoScalingGroupNames: list[str]) -> Any: ...

    def update_auto_scaling_group(self, *, AutoScalingGroupName: str, MixedInstancesPolicy: Any) -> Any: ...


def group_market(autoscaling: GroupClient, group_name: str) -> str:
    """ON_DEMAND once every instance above the base is on-demand, else SPOT."""
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group_name])["AutoScalingGroups"][0]
    share = group["MixedInstancesPolicy"]["InstancesDistribution"].get("OnDemandPercentageAboveBaseCapacity", 0)
    return ON_DEMAND if int(share) == 100 else SPOT


def set_group_market(autoscaling: GroupClient, group_name: str, market: str) -> None:
    share = {ON_DEMAND: 100, SPOT: 0}[market]
    autoscaling.update_auto_scaling_group(AutoScalingGroupName=group_name, MixedInstancesPolicy={
        "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": share}})
