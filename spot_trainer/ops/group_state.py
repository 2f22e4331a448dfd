"""The job's Auto Scaling group as pause and resume see it: how many instances it wants, and at most."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .aws_access import aws_errors
from .problem import JobProblem


@dataclass(frozen=True)
class GroupState:
    name: str
    desired: int
    most: int  # MaxSize: the job's nodes (stacks/resources/spot_fleet.py sets it from the Nodes parameter)
    running: int  # instances still in the group, whatever their lifecycle state

    @property
    def paused(self) -> bool:
        return self.desired == 0


def read_group(autoscaling: Any, name: str) -> GroupState:
    with aws_errors(f"cannot read Auto Scaling group {name}"):
        groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    if not groups:
        raise JobProblem(f"the job's Auto Scaling group {name} does not exist (was the stack changed by hand?)")
    group = groups[0]
    return GroupState(name=name, desired=int(group["DesiredCapacity"]), most=int(group["MaxSize"]),
                      running=len(group.get("Instances", [])))


def set_desired(autoscaling: Any, name: str, count: int) -> None:
    """HonorCooldown off: a user's pause or resume is not a scaling policy's and waits for none."""
    with aws_errors(f"cannot set the desired capacity of {name}"):
        autoscaling.set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=count, HonorCooldown=False)
