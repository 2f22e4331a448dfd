"""The capacity watch (the stack's Lambda) switches a job's group to on-demand when no instance has
run for max_spot_wait, or when none runs while the job is behind its line to the deadline — and
leaves a job alone while an instance reports, once it is done, or when it is already on-demand."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from localcloud import moto_app
from spot_trainer.capacity import watch
from spot_trainer.storage.s3 import job_keys

REGION, BUCKET, JOB, GROUP = "us-east-1", "ckpt-bucket", "lm", "lm-group"
REAL_CLOCK = time.time


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    moto_app.install()  # UpdateAutoScalingGroup changes only the properties named, as in AWS
    for name, value in {"AWS_DEFAULT_REGION": REGION, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                        "GROUP_NAME": GROUP, "BUCKET": BUCKET, "JOB": JOB}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MAX_SPOT_WAIT", raising=False)
    with mock_aws():
        ec2, asg = boto3.client("ec2", REGION), boto3.client("autoscaling", REGION)
        s3, sns, sqs = boto3.client("s3", REGION), boto3.client("sns", REGION), boto3.client("sqs", REGION)
        template = ec2.create_launch_template(LaunchTemplateName="lt", LaunchTemplateData={"ImageId": "ami-12c6146b"})
        asg.create_auto_scaling_group(
            AutoScalingGroupName=GROUP, MinSize=0, MaxSize=1, DesiredCapacity=1, AvailabilityZones=["us-east-1a"],
            MixedInstancesPolicy={
                "LaunchTemplate": {"LaunchTemplateSpecification": {
                    "LaunchTemplateId": template["LaunchTemplate"]["LaunchTemplateId"]},
                    "Overrides": [{"InstanceType": "g5.xlarge"}]},
                "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 0,
                                          "SpotAllocationStrategy": "price-capacity-optimized"}})
        s3.create_bucket(Bucket=BUCKET)
        topic = sns.create_topic(Name="lm-notify")["TopicArn"]
        queue = sqs.create_queue(QueueName="inbox")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
        monkeypatch.setenv("TOPIC_ARN", topic)
        yield {"asg": asg, "s3": s3, "sqs": sqs, "queue": queue}


def later(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The watch runs `seconds` from now (its clock only)."""
    start = REAL_CLOCK()
    monkeypatch.setattr(watch.time, "time", lambda: start + seconds)


def on_demand_share(aws: dict[str, Any]) -> int:
    group = aws["asg"].describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]
    return int(group["MixedInstancesPolicy"]["InstancesDistribution"]["OnDemandPercentageAboveBaseCapacity"])


def put_json(aws: dict[str, Any], key: str, record: dict[str, Any]) -> None:
    aws["s3"].put_object(Bucket=BUCKET, Key=f"{JOB}/{key}", Body=json.dumps(record).encode())


def test_no_instance_for_max_spot_wait_switches_to_on_demand_and_says_so(
        aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_SPOT_WAIT", "30m")
    later(monkeypatch, 29 * 60)
    assert watch.handler({}, None) == "spot is fine" and on_demand_share(aws) == 0
    later(monkeypatch, 31 * 60)
    reason = watch.handler({}, None)
    assert "no instance has run for 31 min (max_spot_wait 30 min)" in reason
    assert on_demand_share(aws) == 100
    group = aws["asg"].describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]
    assert group["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"] == [{"InstanceType": "g5.xlarge"}]
    events = aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix=f"{JOB}/events/")["Contents"]
    event = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=events[0]["Key"])["Body"].read())
    assert (event["kind"], event["from"], event["to"]) == ("market", "spot", "on-demand")
    mail = json.loads(aws["sqs"].receive_message(QueueUrl=aws["queue"])["Messages"][0]["Body"])
    assert mail["Subject"] == "Spot Trainer lm: on-demand" and "switched to on-demand" in mail["Message"]
    assert watch.handler({}, None) == "nothing to do"  # already on-demand: one switch, one message


def test_an_instance_that_reports_keeps_the_job_on_spot(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_SPOT_WAIT", "30m")
    later(monkeypatch, 31 * 60)
    monkeypatch.setattr(watch, "last_seen", lambda *args: REAL_CLOCK() + 30 * 60)  # reported a minute ago
    assert watch.handler({}, None) == "spot is fine" and on_demand_share(aws) == 0


def test_behind_the_deadline_line_with_nothing_running_switches(
        aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    start = time.time()
    status = {"state": "INTERRUPTED", "step": 100, "total_steps": 1000, "first_started_at": start - 3600,
              "deadline_at": start + 4 * 3600, "margin_seconds": 1800}
    put_json(aws, "status.json", status)
    later(monkeypatch, 600)  # a margin short of 1h10m into a 4h30m line: 148 steps due, 100 done
    assert "behind its line to the deadline at step 100" in watch.handler({}, None)
    assert on_demand_share(aws) == 100


def test_ahead_of_the_line_waits_for_spot(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    start = time.time()
    put_json(aws, "status.json", {"state": "INTERRUPTED", "step": 500, "total_steps": 1000,
                                  "first_started_at": start - 3600, "deadline_at": start + 4 * 3600,
                                  "margin_seconds": 1800})
    later(monkeypatch, 600)
    assert watch.handler({}, None) == "spot is fine" and on_demand_share(aws) == 0


def test_a_finished_job_is_left_alone(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_SPOT_WAIT", "1m")
    put_json(aws, "status.json", {"state": "DONE", "step": 1000})
    later(monkeypatch, 3600)
    assert watch.handler({}, None) == "nothing to do" and on_demand_share(aws) == 0


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800.0), ("1d12h", 129600.0), ("45s", 45.0), ("", None)])
def test_durations_read_as_the_job_file_writes_them(text: str, seconds: float | None) -> None:
    assert watch.seconds(text) == seconds


def test_the_watch_reads_and_writes_the_job_s_records_where_the_agents_keep_them() -> None:
    """Inline Lambda code imports nothing of ours: its own spelling of the layout must be job_keys'."""
    source = Path(watch.__file__).read_text()
    for name in (job_keys.STATUS, job_keys.INSTANCES, job_keys.EVENTS):
        assert f'f"{{job}}/{name}' in source, name
    assert job_keys.utc_stamp(0.5) == datetime.fromtimestamp(0.5, UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    assert 'strftime("%Y%m%dT%H%M%S.%fZ")' in source
