"""A region's proxy in front of moto, as an instance of a job of several regions reaches AWS: a request to another
region's bucket waits a round trip and its body crosses at the link's bandwidth, one to its own region's passes at
once; a role's calls through it are still checked by IAM (signature and policy) and recorded; stopping it stops
it, and cuts a connection still open."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from localcloud.iam_policy import ALLOWED
from localcloud.moto_server import MotoServer
from localcloud.region_link import CrossRegionLink
from localcloud.region_proxy import RegionProxy

HERE, THERE = "us-east-1", "eu-west-1"
LOCAL, AWAY = f"job-123456789012-{HERE}", f"job-123456789012-{THERE}"
LATENCY_MS, MBPS = 150.0, 16.0  # 2 MB/s: a megabyte takes half a second
SIZE = 1_000_000


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    folder = tmp_path_factory.mktemp("proxy")
    with MotoServer(log_path=folder / "moto.log", iam_decisions=folder / "iam.jsonl") as server:
        s3 = client(server.endpoint, "s3", THERE)
        s3.create_bucket(Bucket=AWAY, CreateBucketConfiguration={"LocationConstraint": THERE})
        client(server.endpoint, "s3", HERE).create_bucket(Bucket=LOCAL)
        for bucket in (LOCAL, AWAY):
            s3.put_object(Bucket=bucket, Key="job/step", Body=b"s" * SIZE)
        yield server


@pytest.fixture
def proxy(moto: MotoServer) -> Iterator[RegionProxy]:
    started = RegionProxy(HERE, moto.port, CrossRegionLink(latency_ms=LATENCY_MS, mbps=MBPS)).start()
    try:
        yield started
    finally:
        started.stop()


def client(endpoint: str, service: str, region: str, credentials: dict[str, str] | None = None) -> Any:
    keys = credentials or {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    return boto3.client(service, endpoint_url=endpoint, region_name=region, **keys)


def timed(call: Any) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def test_another_regions_bucket_is_a_round_trip_and_the_bandwidth_away_and_its_own_is_not(proxy: RegionProxy) -> None:
    s3 = client(proxy.endpoint, "s3", HERE)
    local = s3.get_object(Bucket=LOCAL, Key="job/step")["Body"].read()
    assert len(local) == SIZE and proxy.bytes_crossed() == 0  # same region: nothing crossed, nothing held
    seconds = timed(lambda: s3.get_object(Bucket=AWAY, Key="job/step")["Body"].read())
    least = LATENCY_MS / 1000 + SIZE / (MBPS * 1e6 / 8)
    assert seconds >= least, (seconds, least)  # a lower bound: the link's cost is paid, however fast moto is
    assert proxy.bytes_crossed("testing") == SIZE
    up = timed(lambda: s3.put_object(Bucket=AWAY, Key="job/up", Body=b"u" * SIZE))
    assert up >= least and proxy.bytes_crossed() == 2 * SIZE  # uploads cross too
    assert timed(lambda: s3.head_object(Bucket=AWAY, Key="job/up")) >= LATENCY_MS / 1000
    assert proxy.bytes_crossed() == 2 * SIZE


def test_the_link_changed_in_place_applies_to_the_next_request(proxy: RegionProxy) -> None:
    s3 = client(proxy.endpoint, "s3", HERE)
    proxy.link.mbps = 4.0  # 0.5 MB/s
    assert timed(lambda: s3.get_object(Bucket=AWAY, Key="job/step")["Body"].read()) >= SIZE / 0.5e6


def test_a_roles_calls_through_the_proxy_are_checked_and_recorded_by_iam(moto: MotoServer,
                                                                          proxy: RegionProxy) -> None:
    iam = client(moto.endpoint, "iam", HERE)
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                     "Action": "sts:AssumeRole"}]}
    role = iam.create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                                                      "Resource": f"arn:aws:s3:::{AWAY}/job/*"}]}
    iam.put_role_policy(RoleName="reader", PolicyName="read", PolicyDocument=json.dumps(policy))
    found = client(moto.endpoint, "sts", HERE).assume_role(RoleArn=role["Arn"], RoleSessionName="i-1")["Credentials"]
    keys = {"aws_access_key_id": found["AccessKeyId"], "aws_secret_access_key": found["SecretAccessKey"],
            "aws_session_token": found["SessionToken"]}
    s3 = client(proxy.endpoint, "s3", HERE, keys)
    assert len(s3.get_object(Bucket=AWAY, Key="job/step")["Body"].read()) == SIZE
    with pytest.raises(ClientError) as denied:
        s3.get_object(Bucket=LOCAL, Key="job/step")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"  # the signature held; the policy said no
    assert proxy.bytes_crossed(found["AccessKeyId"]) == SIZE  # counted for the role's own key
    assert moto.iam_decisions is not None
    seen = [json.loads(line) for line in Path(moto.iam_decisions).read_text().splitlines()]
    assert [(d["role"], d["action"], d["resource"], d["decision"] == ALLOWED) for d in seen] == [
        ("reader", "s3:GetObject", f"arn:aws:s3:::{AWAY}/job/step", True),
        ("reader", "s3:GetObject", f"arn:aws:s3:::{LOCAL}/job/step", False)], seen


def test_stopped_it_answers_no_more(moto: MotoServer) -> None:
    proxy = RegionProxy(HERE, moto.port, CrossRegionLink()).start()
    s3 = client(proxy.endpoint, "s3", HERE)
    assert s3.list_objects_v2(Bucket=LOCAL)["KeyCount"] >= 1  # a kept-alive connection is open now
    proxy.stop()
    with pytest.raises(EndpointConnectionError):
        s3.list_objects_v2(Bucket=LOCAL)
