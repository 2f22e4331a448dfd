"""`cdk deploy` of the example job to moto with the real CLI, read back through boto3, then destroy."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from localcloud.cloud import LocalCloud
from localcloud.moto_server import MotoServer
from localcloud.roles import assume, instance_profile_role
from tests.integration.cdk_cli import cdk
from tests.unit.stack_support import synth

STACK = "SpotTrainer-example"


@pytest.fixture(scope="module")
def deployed(moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    clients = {name: boto3.client(name, endpoint_url=moto_server.endpoint, region_name="us-east-1",
                                  aws_access_key_id="testing", aws_secret_access_key="testing")
               for name in ("cloudformation", "autoscaling", "ec2", "s3", "iam", "logs")}
    vpc = clients["ec2"].describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnets = [s["SubnetId"] for s in clients["ec2"].describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]][:2]
    out = tmp_path_factory.mktemp("cdk.out")
    # The stack ships the runtime as an asset: a user's first hour starts with `cdk bootstrap`.
    LocalCloud(tmp_path_factory.mktemp("bootstrap"), moto=moto_server).bootstrap()
    cdk("synth", "--quiet", "-c", "job=example", "-o", str(out), server=moto_server)
    cdk("deploy", "--app", str(out), "--require-approval", "never", "--parameters", f"VpcId={vpc}",
        "--parameters", f"Subnets={','.join(subnets)}", "--parameters", "SpotMaxPrice=0.42",
        "--parameters", "TrainingCommand=python train.py --lr 'a b'", server=moto_server)
    yield {"clients": clients, "out": out, "subnets": subnets, "vpc": vpc}


def _physical_id(clients: dict, kind: str) -> str:
    (stack,) = clients["cloudformation"].describe_stacks(StackName=STACK)["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    resources = clients["cloudformation"].describe_stack_resources(StackName=STACK)["StackResources"]
    (found,) = [r["PhysicalResourceId"] for r in resources if r.get("ResourceType") == kind]
    return found


def test_deploy_creates_bucket_group_role_and_log_group(deployed: dict) -> None:
    clients = deployed["clients"]
    clients["s3"].head_bucket(Bucket=_physical_id(clients, "AWS::S3::Bucket"))
    (group,) = clients["autoscaling"].describe_auto_scaling_groups(
        AutoScalingGroupNames=["spot-trainer-example"])["AutoScalingGroups"]
    assert group["DesiredCapacity"] == 1 and group["MinSize"] == 0
    assert set(group["VPCZoneIdentifier"].split(",")) == set(deployed["subnets"])
    policy = group["MixedInstancesPolicy"]
    assert policy["InstancesDistribution"]["SpotAllocationStrategy"] == "price-capacity-optimized"
    assert policy["InstancesDistribution"]["OnDemandPercentageAboveBaseCapacity"] == 0
    assert policy["InstancesDistribution"]["SpotMaxPrice"] == "0.42"  # --parameters override
    assert [o["InstanceType"] for o in policy["LaunchTemplate"]["Overrides"]] == [
        "c7i.xlarge", "c6i.xlarge", "m6i.xlarge"]
    (hook,) = clients["autoscaling"].describe_lifecycle_hooks(AutoScalingGroupName="spot-trainer-example")[
        "LifecycleHooks"]
    assert (hook["LifecycleHookName"], hook["HeartbeatTimeout"], hook["DefaultResult"]) == (
        "spot-trainer-drain", 360, "CONTINUE")
    groups = clients["logs"].describe_log_groups(logGroupNamePrefix="/spot-trainer/example")["logGroups"]
    # int(): moto passes the parameter through as a string where AWS stores a number.
    assert [(g["logGroupName"], int(g["retentionInDays"])) for g in groups] == [("/spot-trainer/example", 14)]
    roles = [r["RoleName"] for r in clients["iam"].list_roles()["Roles"] if "TrainerRole" in r["RoleName"]]
    assert roles


def test_the_cli_deploys_the_template_the_unit_tests_check(deployed: dict, tmp_path: Path) -> None:
    """Same context (cdk.json's feature flags) and no per-resource path metadata: the template whose size,
    snapshot, cfn-lint and cdk-nag findings the unit tests check is the one `cdk deploy` sends."""
    deployed_template = json.loads((deployed["out"] / f"{STACK}.template.json").read_text())
    assert deployed_template == synth("example", tmp_path).raw


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_launch_template_carries_rendered_user_data_with_deploy_time_values(deployed: dict) -> None:
    clients = deployed["clients"]
    bucket = _physical_id(clients, "AWS::S3::Bucket")
    (version,) = clients["ec2"].describe_launch_template_versions(
        LaunchTemplateId=_physical_id(clients, "AWS::EC2::LaunchTemplate"))["LaunchTemplateVersions"]
    data = version["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    script = base64.b64decode(data["UserData"]).decode()
    assert script.startswith("#!/")
    assert "export SPOT_USERDATA_VERSION=v2" in script
    # Deploy-time values arrive base64-encoded by CloudFormation: console text cannot end the header.
    assert f"SPOT_BUCKET=$(printf %s '{b64(bucket)}' | base64 -d)" in script
    typed = "python train.py --lr 'a b'"  # the console text, kept literal
    assert f"$(printf %s '{b64(typed)}' | base64 -d)" in script


def _as_instance(deployed: dict, moto_server: MotoServer, service: str) -> Any:
    """A client signed with the credentials EC2 would give the group's instances (their profile's role)."""
    clients = deployed["clients"]
    (group,) = clients["autoscaling"].describe_auto_scaling_groups(
        AutoScalingGroupNames=["spot-trainer-example"])["AutoScalingGroups"]
    spec = group["MixedInstancesPolicy"]["LaunchTemplate"]["LaunchTemplateSpecification"]
    (version,) = clients["ec2"].describe_launch_template_versions(
        LaunchTemplateId=spec["LaunchTemplateId"], Versions=["$Latest"])["LaunchTemplateVersions"]
    role_arn = instance_profile_role(clients["iam"], version["LaunchTemplateData"]["IamInstanceProfile"]["Arn"])
    sts = boto3.client("sts", endpoint_url=moto_server.endpoint, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    role = assume(sts, role_arn, "i-0123456789abcdef0")
    return boto3.client(service, endpoint_url=moto_server.endpoint, region_name="us-east-1",
                        aws_access_key_id=role.access_key_id, aws_secret_access_key=role.secret_access_key,
                        aws_session_token=role.token)


def test_the_instance_role_allows_the_agents_calls_and_nothing_beyond_its_job(
        deployed: dict, moto_server: MotoServer) -> None:
    """The local AWS enforces the deployed policies for a role's holder, resource by resource."""
    bucket = _physical_id(deployed["clients"], "AWS::S3::Bucket")
    s3, logs = _as_instance(deployed, moto_server, "s3"), _as_instance(deployed, moto_server, "logs")
    autoscaling = _as_instance(deployed, moto_server, "autoscaling")
    s3.put_object(Bucket=bucket, Key="example/checkpoints/step-00000001/model.pt", Body=b"w")
    assert s3.list_objects_v2(Bucket=bucket, Prefix="example/checkpoints/")["KeyCount"] == 1
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "example/checkpoints/step-00000001/model.pt"}]})
    logs.create_log_stream(logGroupName="/spot-trainer/example", logStreamName="i-0123456789abcdef0")
    assert autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["spot-trainer-example"])[
        "AutoScalingGroups"]  # the deadline watch's first call
    batch = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "example/x"}, {"Key": "other/x"}]})
    assert {"Key": "other/x", "Code": "AccessDenied"}.items() <= batch["Errors"][-1].items()
    denied = [
        lambda: s3.put_object(Bucket=bucket, Key="another-job/latest.json", Body=b"{}"),
        lambda: s3.list_objects_v2(Bucket=bucket, Prefix="another-job/"),
        lambda: logs.create_log_stream(logGroupName="/spot-trainer/another-job", logStreamName="i-0"),
        lambda: autoscaling.set_desired_capacity(AutoScalingGroupName="another-group", DesiredCapacity=0),
    ]
    for call in denied:
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] in ("AccessDenied", "AccessDeniedException")


def test_destroy_removes_everything_but_the_checkpoints(deployed: dict, moto_server: MotoServer) -> None:
    clients = deployed["clients"]
    bucket = _physical_id(clients, "AWS::S3::Bucket")
    clients["s3"].put_object(Bucket=bucket, Key="example/latest.json", Body=b'{"step": 7}')
    cdk("destroy", "--app", str(deployed["out"]), "--force", server=moto_server)
    stacks = clients["cloudformation"].list_stacks()["StackSummaries"]
    assert all(s["StackStatus"] == "DELETE_COMPLETE" for s in stacks if s["StackName"] == STACK)
    assert not clients["autoscaling"].describe_auto_scaling_groups(
        AutoScalingGroupNames=["spot-trainer-example"])["AutoScalingGroups"]
    assert not clients["logs"].describe_log_groups(logGroupNamePrefix="/spot-trainer/example")["logGroups"]
    body = clients["s3"].get_object(Bucket=bucket, Key="example/latest.json")["Body"].read()
    assert body == b'{"step": 7}'


def test_redeploy_on_the_kept_bucket_resumes_from_its_checkpoints(deployed: dict, moto_server: MotoServer) -> None:
    """After destroy, the same job deployed with ExistingBucket uses the kept bucket, creating none."""
    clients = deployed["clients"]
    kept = [b["Name"] for b in clients["s3"].list_buckets()["Buckets"]
            if clients["s3"].list_objects_v2(Bucket=b["Name"], Prefix="example/latest.json")["KeyCount"]]
    assert len(kept) == 1, "the destroyed stack's bucket is still there"
    buckets_before = len(clients["s3"].list_buckets()["Buckets"])
    cdk("deploy", "--app", str(deployed["out"]), "--require-approval", "never",
        "--parameters", f"ExistingBucket={kept[0]}", "--parameters", f"Subnets={','.join(deployed['subnets'])}",
        "--parameters", f"VpcId={deployed['vpc']}", server=moto_server)
    try:
        assert len(clients["s3"].list_buckets()["Buckets"]) == buckets_before
        kinds = {r.get("ResourceType") for r in clients["cloudformation"].describe_stack_resources(
            StackName=STACK)["StackResources"]}
        assert not kinds & {"AWS::S3::Bucket", "AWS::S3::BucketPolicy"}
        (version,) = clients["ec2"].describe_launch_template_versions(
            LaunchTemplateId=_physical_id(clients, "AWS::EC2::LaunchTemplate"))["LaunchTemplateVersions"]
        script = base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()
        assert f"SPOT_BUCKET=$(printf %s '{b64(kept[0])}' | base64 -d)" in script
    finally:
        cdk("destroy", "--app", str(deployed["out"]), "--force", server=moto_server)
    assert clients["s3"].get_object(Bucket=kept[0], Key="example/latest.json")["Body"].read() == b'{"step": 7}'
