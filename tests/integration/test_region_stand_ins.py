"""The local cloud's Spot placement score and failed launches, read over HTTP with boto3 by the regions
controller's own code: scores that follow each region's capacity plan, AWS's limit on configurations,
and a group's failed launches reported as AWS reports them while its region has no capacity."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from localcloud.moto_server import MotoServer
from localcloud.region_capacity import Board, Window
from spot_trainer.capacity.regions.groups import RegionGroup, observe
from spot_trainer.capacity.regions.groups import move as move
from spot_trainer.capacity.regions.launch_failures import LaunchFailure
from spot_trainer.capacity.regions.moves import Action, JobPlace, MoveRules, decide
from spot_trainer.capacity.regions.observations import RegionObservation, failures_since_success, paged_activities
from spot_trainer.capacity.regions.placement_scores import ScoreCache, ScoreRequest

REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
TYPES = ["g5.xlarge", "g6.xlarge", "g4dn.xlarge"]


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    folder = tmp_path_factory.mktemp("regions")
    with MotoServer(log_path=folder / "moto.log", capacity_board=folder / "board.json") as running:
        yield running


@pytest.fixture
def server(started: MotoServer) -> MotoServer:
    """A fresh account with capacity everywhere."""
    started.reset()
    board(started)
    return started


def client(server: MotoServer, service: str, region: str = "us-east-1") -> Any:
    return boto3.client(service, endpoint_url=server.endpoint, region_name=region,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def board(server: MotoServer, *windows: Window, scores: dict[str, int] | None = None) -> None:
    assert server.capacity_board
    Board(windows, scores or {}).write(server.capacity_board)


def test_scores_follow_each_regions_capacity_plan(server: MotoServer) -> None:
    now = time.time()
    board(server, Window("us-east-1", now - 60, now + 900), Window("eu-west-1", now - 900, now - 60),
          scores={"us-west-2": 8})
    request = ScoreRequest.for_job(TYPES, 2, REGIONS)
    scores = ScoreCache(request).current(client(server, "ec2"), now)
    assert scores == {"us-east-1": 1, "us-west-2": 8, "eu-west-1": 5}  # in an outage, as set, just recovered


def test_the_answer_is_aws_top_ten_in_its_shape(server: MotoServer) -> None:
    ec2 = client(server, "ec2")
    many = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-west-2", "eu-central-1",
            "ap-northeast-1", "ap-southeast-1", "ca-central-1"]
    board(server, Window("us-east-2", time.time() - 10, time.time() + 600))
    answer = ec2.get_spot_placement_scores(InstanceTypes=TYPES, TargetCapacity=1, RegionNames=many)
    assert len(answer["SpotPlacementScores"]) == 10
    assert answer["SpotPlacementScores"][-1] == {"Region": "us-east-2", "Score": 1}
    zones = ec2.get_spot_placement_scores(InstanceTypes=TYPES, TargetCapacity=1, RegionNames=["us-west-2"],
                                          SingleAvailabilityZone=True)["SpotPlacementScores"]
    assert {item["AvailabilityZoneId"] for item in zones} >= {"usw2-az1", "usw2-az2"}
    assert all(set(item) == {"Region", "AvailabilityZoneId", "Score"} for item in zones)


def test_fewer_than_three_instance_types_always_score_low(server: MotoServer) -> None:
    answer = client(server, "ec2").get_spot_placement_scores(InstanceTypes=["g5.xlarge"], TargetCapacity=1,
                                                             RegionNames=["us-west-2"])
    assert answer["SpotPlacementScores"] == [{"Region": "us-west-2", "Score": 3}]


def test_new_configurations_beyond_the_limit_are_refused_and_old_ones_answered(server: MotoServer) -> None:
    ec2 = client(server, "ec2")
    for nodes in range(1, 5):  # four configurations: the stand-in's limit
        ec2.get_spot_placement_scores(InstanceTypes=TYPES, TargetCapacity=nodes, RegionNames=REGIONS)
    with pytest.raises(ClientError, match="MaxConfigLimitExceeded"):
        ec2.get_spot_placement_scores(InstanceTypes=TYPES, TargetCapacity=5, RegionNames=REGIONS)
    again = ec2.get_spot_placement_scores(InstanceTypes=list(reversed(TYPES)), TargetCapacity=2,
                                          RegionNames=list(reversed(REGIONS)))
    assert len(again["SpotPlacementScores"]) == 3
    cache = ScoreCache(ScoreRequest.for_job(TYPES, 7, REGIONS))
    assert cache.current(ec2, time.time()) is None and cache.limited  # decide on failed launches alone


def make_group(server: MotoServer, region: str, desired: int) -> str:
    ec2, asg = client(server, "ec2", region), client(server, "autoscaling", region)
    template = ec2.create_launch_template(LaunchTemplateName="job", LaunchTemplateData={
        "ImageId": "ami-12c6146b", "InstanceType": "g5.xlarge"})["LaunchTemplate"]["LaunchTemplateId"]
    asg.create_auto_scaling_group(AutoScalingGroupName="job-group", MinSize=0, MaxSize=2, DesiredCapacity=desired,
                                  LaunchTemplate={"LaunchTemplateId": template},
                                  AvailabilityZones=[f"{region}a"])
    return "job-group"


def test_a_group_in_a_region_without_capacity_reports_failed_launches_as_aws_does(server: MotoServer) -> None:
    now = time.time()
    group = make_group(server, "us-west-2", desired=1)
    board(server, Window("us-west-2", now - 200, now + 900))
    asg = client(server, "autoscaling", "us-west-2")
    activities = paged_activities(asg, group)
    assert [a["StatusCode"] for a in activities] == ["Failed"] * len(activities) and len(activities) >= 1
    assert activities[0]["StatusMessage"].startswith("Could not launch Spot Instances. UnfulfillableCapacity - ")
    assert activities[0]["StartTime"] >= activities[-1]["StartTime"]  # newest first
    failures = failures_since_success(activities)
    assert failures.newest is LaunchFailure.CAPACITY and failures.count(LaunchFailure.CAPACITY) == len(activities)
    # Another region's group has capacity and reports nothing.
    assert paged_activities(client(server, "autoscaling", "eu-west-1"), make_group(server, "eu-west-1", 1)) == []


def test_capacity_back_is_a_successful_launch_that_ends_the_count(server: MotoServer) -> None:
    group = make_group(server, "us-east-1", desired=1)
    back_at = time.time() + 0.5
    board(server, Window("us-east-1", back_at - 30, back_at))
    time.sleep(max(0.0, back_at - time.time()))
    activities = paged_activities(client(server, "autoscaling"), group)
    assert activities[0]["StatusCode"] == "Successful"
    assert failures_since_success(activities).kinds == ()


def test_a_group_that_wants_no_instance_reports_no_failure(server: MotoServer) -> None:
    now = time.time()
    group = make_group(server, "us-east-1", desired=0)
    board(server, Window("us-east-1", now - 300, now + 300))
    assert paged_activities(client(server, "autoscaling"), group) == []


def test_the_controller_reads_each_regions_group_decides_and_moves_the_job(server: MotoServer) -> None:
    """Home has had no spot capacity for region_wait: its group reports failed launches, AWS scores
    us-west-2 above eu-west-1, and the move sets home's group to 0 and us-west-2's to the job's 2 nodes."""
    now = time.time()
    wanted = {"us-east-1": 2, "us-west-2": 0, "eu-west-1": 0}
    home, west, europe = (RegionGroup(name, make_group(server, name, nodes), client(server, "autoscaling", name))
                          for name, nodes in wanted.items())
    board(server, Window("us-east-1", now - 1000, now + 900), scores={"eu-west-1": 7})
    scores = ScoreCache(ScoreRequest.for_job(TYPES, 2, REGIONS)).current(client(server, "ec2"), now)
    assert scores == {"us-east-1": 1, "us-west-2": 9, "eu-west-1": 7}
    seen = {group.region: observe(group, idle_since=now - 1000, score=scores[group.region], spot_price=1.0)
            for group in (home, west, europe)}
    assert seen["us-east-1"].failures.newest is LaunchFailure.CAPACITY
    # This group launched its instances before the outage began (and names no spot share): the instances went
    # with the capacity, as the player reclaims them, so none runs there now.
    seen["us-east-1"] = RegionObservation("us-east-1", 0, now - 1000, seen["us-east-1"].failures, 1)
    decision = decide(JobPlace(tuple(REGIONS), "us-east-1"), seen, MoveRules(region_wait=900), now)
    assert (decision.action, decision.region) == (Action.MOVE, "us-west-2")
    assert decision.reason == ("no instance has run in us-east-1 for 16m40s (region_wait 15m); "
                               "moving to us-west-2 (placement score 9)")
    move(home, west, 2)
    desired = {g.region: g.client.describe_auto_scaling_groups(AutoScalingGroupNames=[g.name])
               ["AutoScalingGroups"][0]["DesiredCapacity"] for g in (home, west, europe)}
    assert desired == {"us-east-1": 0, "us-west-2": 2, "eu-west-1": 0}
