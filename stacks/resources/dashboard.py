"""A small CloudWatch dashboard for the job: progress, throughput, live instances, interruptions, spend.

The body is written by hand as one Fn::Sub string: the L2 construct splits it at every widget's region,
which costs a kilobyte of a template that must stay below CloudFormation's 51,200-byte inline limit.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Fn
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from stacks.resources.spot_fleet import IN_SERVICE_METRIC


def dashboard_body(job: str, namespace: str, group_name: str) -> str:
    """The body with `${AWS::Region}` left for Fn::Sub."""

    def job_metric(name: str, stat: str, **extra: Any) -> list[Any]:
        return [namespace, name, "Job", job, {"stat": stat, **extra}]

    def widget(title: str, *metrics: list[Any], period: int = 60) -> dict[str, Any]:
        return {"type": "metric", "properties": {  # CloudWatch's default size: 6 x 6, four a row
            "title": title, "region": "${AWS::Region}", "period": period, "metrics": list(metrics)}}

    widgets = [
        widget("Step", job_metric("Step", "Maximum")),
        widget("Loss", job_metric("Loss", "Average")),
        widget("Samples per second", job_metric("SamplesPerSecond", "Average")),
        widget("Instances in service", ["AWS/AutoScaling", IN_SERVICE_METRIC, "AutoScalingGroupName", group_name,
                                        {"stat": "Maximum"}]),
        widget("Interruptions", job_metric("Interruptions", "Sum")),
        # Each heartbeat puts the instance's cost since the previous one: the running sum is the job's spend.
        widget("Spend (USD, over the range shown)", [{"expression": "RUNNING_SUM(spend)", "label": "USD"}],
               job_metric("SpendUSD", "Sum", id="spend", visible=False), period=300),
    ]
    return json.dumps({"widgets": widgets}, separators=(",", ":"))


class JobDashboard(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, job: str, namespace: str, group_name: str) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.CfnDashboard(self, "Dashboard", dashboard_name=f"spot-trainer-{job}",
                                                 dashboard_body=Fn.sub(dashboard_body(job, namespace, group_name)))
