"""Two parts of AWS that moto lacks and a job across regions reads: the Spot placement score, and a
group's failed launches. Both answer from the capacity board (localcloud/region_capacity.py).

GetSpotPlacementScores (moto raises NotImplementedError) answers as AWS does: the top 10 of the
regions asked, {Region, Score} or, with SingleAvailabilityZone, {Region, AvailabilityZoneId, Score};
a score of at most 3 with fewer than three instance types (AWS: "the score is always low"); and
MaxConfigLimitExceeded once an account asks for more than CONFIG_LIMIT distinct configurations in
24 hours, while a configuration asked in those 24 hours may be asked again. AWS does not publish the
number; it says it "can limit the number of new request configurations within a 24-hour period"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-placement-score.html#sps-limitations).

DescribeScalingActivities (moto returns none) lists, while the group's region has no spot capacity and
the group wants instances, one Failed launch every LAUNCH_RETRY_SECONDS with AWS's StatusMessage
(https://docs.aws.amazon.com/autoscaling/ec2/userguide/ts-as-capacity.html), and a Successful launch
once capacity is back; newest first, as AWS lists them.

DescribeSpotPriceHistory (moto answers 0.00001 for every type everywhere) answers the board's price for
a region that has one, for each type and AZ moto offers there, as the effective price at StartTime
(AWS "also returns the last price change before the start time, which is the effective price as of the
start time": https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from moto.autoscaling.responses import AutoScalingResponse
from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError, InvalidParameterValueError
from moto.ec2.models import ec2_backends
from moto.ec2.responses import EC2Response
from moto.ec2.responses.spot_instances import SpotInstances

from localcloud.region_capacity import BOARD_ENV, Board, Window, read_board

CONFIG_LIMIT = 4
CONFIG_WINDOW_SECONDS = 86400.0
LOW_SCORE = 3  # the highest score AWS gives a request naming fewer than three instance types
LAUNCH_RETRY_SECONDS = 60.0
NO_CAPACITY = ("Could not launch Spot Instances. UnfulfillableCapacity - There is no capacity available that "
               "matches your request. Launching EC2 instance failed.")


class MaxConfigLimitExceeded(EC2ClientError):
    def __init__(self) -> None:
        super().__init__("MaxConfigLimitExceeded", "You have exceeded the maximum number of Spot placement "
                                                   "score request configurations. Try again in 24 hours.")


def _note_configuration(account: str, configuration: str, now: float) -> None:
    """Kept on the account's home-region EC2 backend, so moto's reset forgets them with the rest."""
    backend = ec2_backends[account]["us-east-1"]
    if not hasattr(backend, "placement_score_configurations"):
        backend.placement_score_configurations = {}  # type: ignore[attr-defined]
    asked: dict[str, float] = backend.placement_score_configurations  # type: ignore[attr-defined]
    for old in [c for c, at in asked.items() if now - at >= CONFIG_WINDOW_SECONDS]:
        del asked[old]
    if configuration not in asked and len(asked) >= CONFIG_LIMIT:
        raise MaxConfigLimitExceeded()
    asked[configuration] = now


def _zone_ids(account: str, region: str) -> list[str]:
    return [zone.zone_id for zone in ec2_backends[account][region].describe_availability_zones()]


def get_spot_placement_scores(self: EC2Response) -> ActionResult:
    types = self._get_param("InstanceTypes", [])
    regions = self._get_param("RegionNames", []) or list(ec2_backends[self.current_account].regions)
    capacity = self._get_int_param("TargetCapacity")
    single_zone = self._get_bool_param("SingleAvailabilityZone", False)
    if not capacity or capacity < 1:
        raise InvalidParameterValueError(f"TargetCapacity {capacity}")
    if len(regions) > 10:
        raise InvalidParameterValueError(f"RegionNames ({len(regions)} regions; at most 10)")
    configuration = json.dumps([sorted(types), capacity, self._get_param("TargetCapacityUnitType", "units"),
                                single_zone, sorted(regions)])
    now = time.time()
    _note_configuration(self.current_account, configuration, now)
    board = read_board(os.environ.get(BOARD_ENV))
    ceiling = 10 if len(set(types)) >= 3 else LOW_SCORE
    scores = [{"Region": region, "Score": min(ceiling, board.score(region, now)),
               **({"AvailabilityZoneId": zone} if zone else {})}
              for region in regions for zone in (_zone_ids(self.current_account, region) if single_zone else [""])]
    scores.sort(key=lambda item: -int(item["Score"]))  # type: ignore[call-overload]
    return ActionResult({"SpotPlacementScores": scores[:10]})


def failed_launches(board: Board, region: str, group: str, since: float, now: float) -> list[dict[str, Any]]:
    """The group's launch activities from `since` to `now` in `region`, newest first."""
    found: list[dict[str, Any]] = []
    for window in (w for w in board.windows if w.region == region and w.end > since and w.start <= now):
        found.extend(_window_activities(window, group, max(since, window.start), now))
    return sorted(found, key=lambda activity: activity["StartTime"], reverse=True)


def _window_activities(window: Window, group: str, start: float, now: float) -> list[dict[str, Any]]:
    tries = int((min(now, window.end) - start) // LAUNCH_RETRY_SECONDS) + 1
    found = [_activity(group, start + n * LAUNCH_RETRY_SECONDS, "Failed", NO_CAPACITY) for n in range(tries)
             if start + n * LAUNCH_RETRY_SECONDS < window.end]
    if window.end <= now:
        found.append(_activity(group, window.end, "Successful", ""))
    return found


def _activity(group: str, at: float, status: str, message: str) -> dict[str, Any]:
    moment = datetime.fromtimestamp(at, UTC)
    reason = f"  Status Reason: {message}" if message else ""
    return {"ActivityId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{group}/{at}")), "AutoScalingGroupName": group,
            "Description": f"Launching a new EC2 instance.{reason}",
            "Cause": f"At {moment:%Y-%m-%dT%H:%M:%SZ} an instance was started in response to a difference between "
                     "desired and actual capacity, increasing the capacity from 0 to 1.",
            "StartTime": moment, "EndTime": moment, "StatusCode": status, "Progress": 100, "Details": "{}",
            **({"StatusMessage": message} if message else {})}


def describe_scaling_activities(self: AutoScalingResponse) -> ActionResult:
    name = self._get_param("AutoScalingGroupName")
    group = self.autoscaling_backend.autoscaling_groups.get(name) if name else None
    if group is None or group.desired_capacity == 0:
        return ActionResult({"Activities": []})
    created = datetime.fromisoformat(group.created_time).timestamp()
    activities = failed_launches(read_board(os.environ.get(BOARD_ENV)), self.region, name, created, time.time())
    start = int(self._get_param("NextToken") or 0)
    size = int(self._get_param("MaxRecords") or 100)
    page = {"Activities": activities[start:start + size]}
    if start + size < len(activities):
        page["NextToken"] = str(start + size)  # type: ignore[assignment]
    return ActionResult(page)


_moto_price_history = SpotInstances.describe_spot_price_history


def describe_spot_price_history(self: SpotInstances) -> ActionResult:
    price = read_board(os.environ.get(BOARD_ENV)).prices.get(self.region)
    if price is None:
        return _moto_price_history(self)
    offered = self.ec2_backend.describe_spot_price_history(self._get_param("InstanceTypes", []),
                                                           self._filters_from_querystring())
    return ActionResult({"SpotPriceHistory": [
        {"InstanceType": offer["InstanceType"], "ProductDescription": "Linux/UNIX", "SpotPrice": f"{price:.6f}",
         "AvailabilityZone": offer["Location"], "Timestamp": datetime.fromtimestamp(time.time() - 3600, UTC)}
        for offer in offered]})


def install() -> None:
    EC2Response.get_spot_placement_scores = get_spot_placement_scores  # type: ignore[attr-defined]
    SpotInstances.describe_spot_price_history = describe_spot_price_history  # type: ignore[method-assign]
    AutoScalingResponse.describe_scaling_activities = describe_scaling_activities  # type: ignore[method-assign]
