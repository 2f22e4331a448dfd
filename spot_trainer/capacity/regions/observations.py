"""What the controller sees of one region each minute: its group's instances and failed launches,
the cached placement score, and its spot price; and the newest checkpoint's region, job-wide."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .launch_failures import LaunchFailure, classify, failure_code


@dataclass(frozen=True)
class LaunchFailures:
    """The group's failed launches since its last successful one, newest first, by kind."""

    kinds: tuple[LaunchFailure, ...] = ()
    last_message: str = ""

    def count(self, kind: LaunchFailure) -> int:
        return sum(1 for found in self.kinds if found is kind)

    @property
    def newest(self) -> LaunchFailure | None:
        return self.kinds[0] if self.kinds else None

    @property
    def last_code(self) -> str:
        return failure_code(self.last_message) if self.last_message else ""


def failures_since_success(activities: Iterable[Mapping[str, Any]]) -> LaunchFailures:
    """Read DescribeScalingActivities' Activities (AWS lists them newest first): the Failed ones up to
    the newest Successful one; activities still in progress say nothing yet."""
    kinds: list[LaunchFailure] = []
    last_message = ""
    for activity in activities:
        status = activity.get("StatusCode")
        if status == "Successful":
            break
        if status == "Failed":
            message = str(activity.get("StatusMessage", ""))
            kinds.append(classify(message))
            last_message = last_message or message
    return LaunchFailures(tuple(kinds), last_message)


@dataclass(frozen=True)
class RegionObservation:
    """One region at one minute. `idle_since`: when its last instance stopped running, or when the
    job became active there (None while an instance runs). `score`: the cached placement score (1-10),
    None when none is known. `spot_price`: dollars per instance-hour of the job's types."""

    region: str
    running: int = 0
    idle_since: float | None = None
    failures: LaunchFailures = field(default_factory=LaunchFailures)
    score: int | None = None
    spot_price: float | None = None


def paged_activities(autoscaling: Any, group_name: str, limit: int = 50) -> list[dict[str, Any]]:
    """The group's newest scaling activities, newest first (boto3's paginator; `limit` bounds the read)."""
    found: list[dict[str, Any]] = []
    paginator = autoscaling.get_paginator("describe_scaling_activities")
    for page in paginator.paginate(AutoScalingGroupName=group_name, PaginationConfig={"MaxItems": limit}):
        found.extend(page.get("Activities", []))
    return found
