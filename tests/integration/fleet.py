"""An Auto Scaling group in moto shaped as the stack creates it, for agent tests that scale it."""

from __future__ import annotations

from typing import Any

import boto3


def create_group(aws_env: dict[str, str], name: str, drain_hook: str = "") -> Any:
    """A launch template and a one-instance group; with `drain_hook`, a termination lifecycle hook of
    that name. Returns the autoscaling client."""
    endpoint = aws_env["AWS_ENDPOINT_URL"]
    ec2 = boto3.client("ec2", endpoint_url=endpoint)
    autoscaling = boto3.client("autoscaling", endpoint_url=endpoint)
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    ec2.create_launch_template(LaunchTemplateName=name,
                               LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "t3.micro"})
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateName": name, "Version": "$Latest"},
        MinSize=0, MaxSize=1, DesiredCapacity=1, VPCZoneIdentifier=subnet)
    if drain_hook:
        autoscaling.put_lifecycle_hook(LifecycleHookName=drain_hook, AutoScalingGroupName=name,
                                       LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
                                       HeartbeatTimeout=300, DefaultResult="CONTINUE")
    return autoscaling


def desired_capacity(autoscaling: Any, group: str) -> int:
    groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return int(groups["AutoScalingGroups"][0]["DesiredCapacity"])
