"""Why an Auto Scaling group's launch failed, read from its scaling activity's StatusMessage.

AWS's troubleshooting pages name the codes a failed activity's message carries:
https://docs.aws.amazon.com/autoscaling/ec2/userguide/ts-as-capacity.html (capacity and quota) and
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html (what each code means).
Capacity comes back by itself (another region may have it now); a quota does not: waiting does not
help, only a quota increase does; anything else is the job's configuration (image, subnet, role).
"""

from __future__ import annotations

from enum import StrEnum


class LaunchFailure(StrEnum):
    CAPACITY = "capacity"
    QUOTA = "quota"
    CONFIGURATION = "configuration"


CAPACITY_CODES = ("UnfulfillableCapacity", "InsufficientInstanceCapacity", "InsufficientCapacity")
QUOTA_CODES = ("MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "InstanceLimitExceeded")


def classify(status_message: str) -> LaunchFailure:
    """The kind of failure a Failed activity's StatusMessage states, such as
    "Could not launch Spot Instances. UnfulfillableCapacity - There is no capacity available ..."."""
    if any(code in status_message for code in CAPACITY_CODES):
        return LaunchFailure.CAPACITY
    if any(code in status_message for code in QUOTA_CODES):
        return LaunchFailure.QUOTA
    return LaunchFailure.CONFIGURATION


def failure_code(status_message: str) -> str:
    """The code a message names (UnfulfillableCapacity, VcpuLimitExceeded, ...), or its first 60 characters."""
    for code in (*CAPACITY_CODES, *QUOTA_CODES):
        if code in status_message:
            return code
    return status_message.strip()[:60]
