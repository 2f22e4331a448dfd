"""The stall alarm: no Step sample for N minutes while the group has an instance in service → the topic.

The agent puts Step for every reported step (at most once a second) and on every checkpoint upload, so
a minute without a sample is a minute without progress. Minutes with no instance in service (the job
paused, done, or waiting for capacity) never count: a stall is training that should run and does not.
"""

from __future__ import annotations

from aws_cdk import CfnCondition, Fn, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from stacks.resources.spot_fleet import IN_SERVICE_METRIC

PERIOD_SECONDS = 60  # one evaluation per minute: N minutes = N periods (CloudWatch allows up to a day)
STALLED = "IF(FILL(live, 0) > 0 AND FILL(steps, 0) == 0, 1, 0)"


def _query(query_id: str, namespace: str, name: str, dimension: tuple[str, str],
           stat: str) -> cloudwatch.CfnAlarm.MetricDataQueryProperty:
    return cloudwatch.CfnAlarm.MetricDataQueryProperty(
        id=query_id, return_data=False,
        metric_stat=cloudwatch.CfnAlarm.MetricStatProperty(
            metric=cloudwatch.CfnAlarm.MetricProperty(
                namespace=namespace, metric_name=name,
                dimensions=[cloudwatch.CfnAlarm.DimensionProperty(name=dimension[0], value=dimension[1])]),
            period=PERIOD_SECONDS, stat=stat))


class StallAlarm(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, job: str, namespace: str, group_name: str,
                 minutes: str, topic_arn: str) -> None:
        super().__init__(scope, construct_id)
        self.condition = CfnCondition(self, "Wanted", expression=Fn.condition_not(Fn.condition_equals(minutes, "0")))
        periods = Token.as_number(minutes)
        self.alarm = cloudwatch.CfnAlarm(
            self, "Alarm",
            alarm_description=f"Spot Trainer job {job}: no training step while an instance is in service",
            metrics=[
                _query("steps", namespace, "Step", ("Job", job), "SampleCount"),
                _query("live", "AWS/AutoScaling", IN_SERVICE_METRIC, ("AutoScalingGroupName", group_name),
                       "Maximum"),
                cloudwatch.CfnAlarm.MetricDataQueryProperty(id="stalled", expression=STALLED, return_data=True),
            ],
            comparison_operator="GreaterThanOrEqualToThreshold", threshold=1,
            evaluation_periods=periods, datapoints_to_alarm=periods,
            treat_missing_data="notBreaching",
            # No OK action: the alarm's first evaluation after deploy would mail "OK" for nothing.
            alarm_actions=[topic_arn],
        )
        self.alarm.cfn_options.condition = self.condition
