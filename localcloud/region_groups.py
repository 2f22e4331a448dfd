"""The job's groups and buckets as the player reaches them: one region's, or every listed region's for a job of
several (home first). Which region an instance runs in, its group's market, the job's newest published step
wherever it was saved, and the agents' events from every region's bucket."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from localcloud.agent_events import EventFeed
from localcloud.cloud import Deployment, LocalCloud
from spot_trainer.capacity.policy import ON_DEMAND, SPOT
from spot_trainer.storage.s3.job_keys import LATEST, STATUS, job_key
from spot_trainer.storage.s3.latest_record import LatestRecord


@dataclass
class RegionGroups:
    cloud: LocalCloud
    deployment: Deployment  # home's; its `others` are the job's other regions
    region_of: dict[str, str] = field(default_factory=dict)  # instance → the region it was launched in
    _clients: dict[tuple[str, str], Any] = field(default_factory=dict)
    _feeds: list[EventFeed] = field(default_factory=list)

    def client(self, service: str, region: str) -> Any:
        if (service, region) not in self._clients:
            self._clients[service, region] = self.cloud.client(service, region)
        return self._clients[service, region]

    def groups(self) -> list[tuple[Deployment, dict[str, Any]]]:
        """Every region's group as Auto Scaling describes it now."""
        return [(place, self.client("autoscaling", place.region).describe_auto_scaling_groups(
            AutoScalingGroupNames=[place.group])["AutoScalingGroups"][0]) for place in self.deployment.every_region()]

    def terminate(self, iid: str) -> None:
        """The instance gone from its group (which launches a replacement where its region has capacity)."""
        region = self.region_of.get(iid, self.deployment.region)
        try:
            self.client("autoscaling", region).terminate_instance_in_auto_scaling_group(
                InstanceId=iid, ShouldDecrementDesiredCapacity=False)
        except Exception:  # already gone from the group (replaced early, or scaled in)
            self.client("ec2", region).terminate_instances(InstanceIds=[iid])

    def latest_step(self) -> int | None:
        """The newest step latest.json names in any region's bucket (None before the first)."""
        steps = [step for place in self.deployment.every_region() if (step := self._latest(place)) is not None]
        return max(steps) if steps else None

    def _latest(self, place: Deployment) -> int | None:
        try:
            body = self.client("s3", place.region).get_object(Bucket=place.bucket, Key=job_key(place.job, LATEST))
            return LatestRecord.from_json(body["Body"].read()).step
        except Exception:  # not there yet
            return None

    def new_events(self) -> dict[str, list[dict[str, Any]]]:
        """The agents' new events in every region's bucket, by instance (an instance writes to its own region's)."""
        if not self._feeds:
            self._feeds = [EventFeed(self.client("s3", place.region), place.bucket, place.job)
                           for place in self.deployment.every_region()]
        merged: dict[str, list[dict[str, Any]]] = {}
        for feed in self._feeds:
            for instance, events in feed.new_events().items():
                merged.setdefault(instance, []).extend(events)
        return merged


def newest_status(cloud: LocalCloud, deployment: Deployment) -> dict[str, Any] | None:
    """The job's status.json from the region it last ran in (the newest of its regions' records)."""
    found = []
    for place in deployment.every_region():
        try:
            body = cloud.client("s3", place.region).get_object(Bucket=place.bucket, Key=job_key(place.job, STATUS))
            found.append(json.loads(body["Body"].read()))
        except Exception:  # none there (yet)
            continue
    return max(found, key=lambda status: str(status.get("updated_at", ""))) if found else None


def group_market(group: dict[str, Any]) -> str:
    share = group["MixedInstancesPolicy"]["InstancesDistribution"].get("OnDemandPercentageAboveBaseCapacity", 0)
    return ON_DEMAND if int(share) == 100 else SPOT
