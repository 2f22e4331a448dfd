"""The regions controller's own code, a minute at a time, against the local AWS over HTTP: three regions' groups
and buckets, the capacity board playing each region's spot capacity and placement score. A home region without
capacity is left for the best-scored region (of two that score alike, the cheaper), and only one region ever
wants instances."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from localcloud.moto_server import MotoServer
from localcloud.region_capacity import Board, Window
from spot_trainer.aws_names import regional_bucket_name
from spot_trainer.capacity.region_controller import ControllerSetup, tick
from spot_trainer.capacity.regions.place_record import PlaceRecord

REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
ACCOUNT = "123456789012"  # moto's
GROUP = "spot-trainer-moving"
SETUP = ControllerSetup(job="moving", regions=REGIONS, account=ACCOUNT, group=GROUP, nodes=2, region_wait=900.0,
                        instance_types=("c7i.xlarge", "c6i.xlarge", "m6i.xlarge"), topic_arn="")


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    folder = tmp_path_factory.mktemp("controller")
    with MotoServer(log_path=folder / "moto.log", capacity_board=folder / "board.json") as running:
        yield running


@pytest.fixture
def server(started: MotoServer) -> MotoServer:
    started.reset()
    return started


def clients(server: MotoServer) -> Any:
    def client(service: str, region: str) -> Any:
        return boto3.client(service, endpoint_url=server.endpoint, region_name=region,
                            aws_access_key_id="testing", aws_secret_access_key="testing")
    return client


def deploy(server: MotoServer, board: Board) -> None:
    """What the job's three stacks make that the controller reads: a spot group (home at the job's nodes, the
    others at 0) and a bucket in each region; the board first, so home's group launches as its region allows."""
    assert server.capacity_board
    board.write(server.capacity_board)
    client = clients(server)
    for region in REGIONS:
        template = client("ec2", region).create_launch_template(LaunchTemplateName="job", LaunchTemplateData={
            "ImageId": "ami-12c6146b"})["LaunchTemplate"]["LaunchTemplateId"]
        client("autoscaling", region).create_auto_scaling_group(
            AutoScalingGroupName=GROUP, MinSize=0, MaxSize=2, DesiredCapacity=2 if region == REGIONS[0] else 0,
            AvailabilityZones=[f"{region}a"], MixedInstancesPolicy={
                "LaunchTemplate": {"LaunchTemplateSpecification": {"LaunchTemplateId": template},
                                   "Overrides": [{"InstanceType": t} for t in SETUP.instance_types]},
                "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 0}})
        s3 = client("s3", region)
        bucket = regional_bucket_name("moving", region, ACCOUNT)
        s3.create_bucket(Bucket=bucket, **({} if region == "us-east-1" else
                                            {"CreateBucketConfiguration": {"LocationConstraint": region}}))


def desired(server: MotoServer) -> dict[str, int]:
    return {region: clients(server)("autoscaling", region).describe_auto_scaling_groups(
        AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]["DesiredCapacity"] for region in REGIONS}


def record(server: MotoServer) -> PlaceRecord:
    body = clients(server)("s3", "us-east-1").get_object(Bucket=regional_bucket_name("moving", "us-east-1", ACCOUNT),
                                                          Key="moving/regions.json")["Body"].read()
    return PlaceRecord.from_json(body)


def test_home_without_capacity_is_left_for_the_best_scored_region(server: MotoServer) -> None:
    now = time.time()
    deploy(server, Board((Window("us-east-1", now - 30, now + 3600),), {"us-west-2": 3, "eu-west-1": 9}))
    outcome = tick(SETUP, clients(server), now)
    assert outcome == "stay: waiting for spot capacity in us-east-1: 0s of region_wait 15m, 1 of 3 capacity " \
        "failures", outcome
    assert desired(server) == {"us-east-1": 2, "us-west-2": 0, "eu-west-1": 0}
    now += SETUP.region_wait  # the controller's clock: a quarter of an hour of minutes in which nothing ran
    outcome = tick(SETUP, clients(server), now)
    assert outcome.startswith("move: no instance has run in us-east-1 for 15m (region_wait 15m)"), outcome
    assert "moving to eu-west-1 (placement score 9" in outcome  # us-west-2 scores 3, below the threshold
    assert desired(server) == {"us-east-1": 0, "us-west-2": 0, "eu-west-1": 2}
    moved = record(server)
    assert moved.active == "eu-west-1" and [(m.source, m.target) for m in moved.moves] == [("us-east-1", "eu-west-1")]
    assert moved.regions["us-east-1"].failure.startswith("UnfulfillableCapacity")
    events = clients(server)("s3", "us-east-1").list_objects_v2(
        Bucket=regional_bucket_name("moving", "us-east-1", ACCOUNT), Prefix="moving/events/")["Contents"]
    (event,) = [json.loads(clients(server)("s3", "us-east-1").get_object(
        Bucket=regional_bucket_name("moving", "us-east-1", ACCOUNT), Key=e["Key"])["Body"].read()) for e in events]
    assert (event["kind"], event["from"], event["to"]) == ("region", "us-east-1", "eu-west-1")
    # the next minute: eu-west-1 has capacity, its instances run; the job stays
    running = clients(server)("autoscaling", "eu-west-1").describe_auto_scaling_groups(
        AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]["Instances"]
    assert len(running) == 2
    assert tick(SETUP, clients(server), now + 60).startswith("stay: 2 instance(s) running in eu-west-1")


def test_a_home_that_runs_keeps_the_job_and_a_second_region_wanting_instances_is_set_back(server: MotoServer) -> None:
    deploy(server, Board((), {}))
    clients(server)("autoscaling", "us-west-2").set_desired_capacity(AutoScalingGroupName=GROUP, DesiredCapacity=2)
    outcome = tick(SETUP, clients(server), time.time())
    assert outcome.startswith("stay: 2 instance(s) running in us-east-1"), outcome
    assert desired(server) == {"us-east-1": 2, "us-west-2": 0, "eu-west-1": 0}


def test_a_damaged_record_is_named_and_where_the_job_is_still_known(server: MotoServer) -> None:
    deploy(server, Board((), {}))
    clients(server)("s3", "us-east-1").put_object(Bucket=regional_bucket_name("moving", "us-east-1", ACCOUNT),
                                                  Key="moving/regions.json", Body=b"{not json")
    outcome = tick(SETUP, clients(server), time.time())
    assert outcome.startswith("regions.json is not a regions record (JSONDecodeError"), outcome
    assert "stay: 2 instance(s) running in us-east-1" in outcome and record(server).active == "us-east-1"


def test_a_paused_job_is_not_moved_however_long_nothing_runs(server: MotoServer) -> None:
    now = time.time()
    deploy(server, Board((Window("us-east-1", now - 30, now + 3600),), {"eu-west-1": 9}))
    clients(server)("autoscaling", "us-east-1").set_desired_capacity(AutoScalingGroupName=GROUP, DesiredCapacity=0)
    tick(SETUP, clients(server), now)
    outcome = tick(SETUP, clients(server), now + 2 * SETUP.region_wait)
    assert outcome == "stay: the job wants no instance in us-east-1 (paused or ended): nothing to move", outcome
    assert desired(server) == {"us-east-1": 0, "us-west-2": 0, "eu-west-1": 0}


def test_a_score_tie_where_no_region_holds_the_checkpoint_goes_to_the_cheaper_region(server: MotoServer) -> None:
    now = time.time()
    deploy(server, Board((Window("us-east-1", now - 30, now + 3600),), {"us-west-2": 8, "eu-west-1": 8},
                         prices={"us-east-1": 0.2, "us-west-2": 0.9, "eu-west-1": 0.6}))
    tick(SETUP, clients(server), now)
    outcome = tick(SETUP, clients(server), now + SETUP.region_wait)
    assert "moving to eu-west-1 (placement score 8, lowest spot price among the tied, $0.600/h)" in outcome, outcome
    assert desired(server) == {"us-east-1": 0, "us-west-2": 0, "eu-west-1": 2}
    assert record(server).prices == {"us-east-1": 0.2, "us-west-2": 0.9, "eu-west-1": 0.6}


def test_a_region_whose_price_cannot_be_read_leaves_the_tie_to_the_job_file_s_order(server: MotoServer) -> None:
    now = time.time()
    deploy(server, Board((Window("us-east-1", now - 30, now + 3600),), {"us-west-2": 8, "eu-west-1": 8},
                         prices={"us-west-2": 0.9, "eu-west-1": 0.6}))
    with socket.socket() as closed:  # a port nothing listens on: eu-west-1's EC2 cannot be reached
        closed.bind(("127.0.0.1", 0))
        unreachable = f"http://127.0.0.1:{closed.getsockname()[1]}"
    reachable = clients(server)

    def client(service: str, region: str) -> Any:
        if (service, region) != ("ec2", "eu-west-1"):
            return reachable(service, region)
        return boto3.client("ec2", endpoint_url=unreachable, region_name=region, aws_access_key_id="testing",
                            aws_secret_access_key="testing", config=Config(retries={"max_attempts": 1}))

    first = tick(SETUP, client, now)
    assert first.startswith("spot price unknown in eu-west-1 (DescribeSpotPriceHistory failed: Could not connect"), \
        first
    assert first.count("spot price unknown") == 1 and "$0" not in first
    outcome = tick(SETUP, client, now + SETUP.region_wait)
    assert "moving to us-west-2 (placement score 8, tied with eu-west-1; spot price unknown in eu-west-1, so the " \
           "job file's order decides)" in outcome, outcome
    assert desired(server) == {"us-east-1": 0, "us-west-2": 2, "eu-west-1": 0}
    assert "eu-west-1" not in record(server).prices  # unknown, never 0
