"""The parts of boto3's clients the agent calls, as Protocols.

boto3 builds its clients at run time and ships no types; these name exactly the calls the agent
makes (and the instance role allows), so mypy checks every call site and a test may pass any
object that answers them.
"""

from __future__ import annotations

from typing import Any, Protocol


class AutoScalingClient(Protocol):
    """boto3 "autoscaling": the agent's own group only."""

    def set_desired_capacity(self, *, AutoScalingGroupName: str, DesiredCapacity: int,
                             HonorCooldown: bool) -> Any: ...

    def complete_lifecycle_action(self, *, LifecycleHookName: str, AutoScalingGroupName: str,
                                  LifecycleActionResult: str, InstanceId: str) -> Any: ...

    def describe_auto_scaling_groups(self, *, AutoScalingGroupNames: list[str]) -> Any: ...

    def update_auto_scaling_group(self, *, AutoScalingGroupName: str, MixedInstancesPolicy: Any) -> Any: ...


class LogsClient(Protocol):
    """boto3 "logs": the instance's stream in the job's log group."""

    exceptions: Any  # botocore's modeled errors (ResourceAlreadyExistsException)

    def create_log_stream(self, *, logGroupName: str, logStreamName: str) -> Any: ...

    def put_log_events(self, *, logGroupName: str, logStreamName: str,
                       logEvents: list[dict[str, Any]]) -> Any: ...


class MetricsClient(Protocol):
    """boto3 "cloudwatch": PutMetricData in the job's namespace."""

    def put_metric_data(self, *, Namespace: str, MetricData: list[dict[str, Any]]) -> Any: ...
