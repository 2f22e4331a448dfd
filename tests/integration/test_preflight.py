"""`python -m stacks.preflight --job NAME` against a local account set up with each condition that stops a
first deploy, then with each one fixed: one line per problem, read-only, exit 0 once nothing is left."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from localcloud.cloud import LocalCloud
from localcloud.moto_server import MotoServer
from stacks.instance.runtime_wheel import REPO_ROOT
from stacks.job.spec import JOBS_DIR

GPU_TYPES = '"g5.xlarge", "g4dn.xlarge"'


@pytest.fixture
def account(tmp_path: Path) -> Iterator[MotoServer]:
    """A new account of its own: no bootstrap, a new account's spot quotas (0 vCPUs for G)."""
    with MotoServer(log_path=tmp_path / "moto.log") as server:
        yield server


def client(server: MotoServer, service: str):  # type: ignore[no-untyped-def]
    return boto3.client(service, endpoint_url=server.endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def gpu_job(folder: Path, *, ami: str, types: str = GPU_TYPES, nodes: int = 2, secrets: str = "") -> Path:
    text = (JOBS_DIR / "example.toml").read_text().replace("[run]", f"[run]\nsecrets = [{secrets}]", 1)
    lines = [line for line in text.splitlines() if not line.startswith(("instance_types", "ami", "nodes"))]
    text = "\n".join(lines).replace("[capacity]", f'[capacity]\ninstance_types = [{types}]\nami = "{ami}"\n'
                                    f"nodes = {nodes}", 1)
    (folder / "gpu.toml").write_text(text)
    return folder / "gpu.toml"


def preflight(server: MotoServer, job: Path) -> tuple[int, list[str]]:
    env = {**os.environ, **server.env(), "AWS_EC2_METADATA_DISABLED": "true",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    done = subprocess.run([sys.executable, "-m", "stacks.preflight", "--job", str(job)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, [line for line in done.stderr.splitlines() if line.startswith("preflight: ")]


def test_a_new_account_is_told_each_thing_in_the_way_then_nothing(account: MotoServer, tmp_path: Path) -> None:
    job = gpu_job(tmp_path, ami="/spot-trainer/images/gpu",
                  secrets='"HF_TOKEN=ssm:/team/hf", "WANDB_API_KEY=secretsmanager:team/wandb"')
    code, lines = preflight(account, job)
    assert code == 1
    assert "preflight: run.secrets: HF_TOKEN: no parameter /team/hf in Parameter Store in us-east-1" in lines
    assert "preflight: run.secrets: WANDB_API_KEY: no secret team/wandb in Secrets Manager in us-east-1" in lines
    assert any("no CDK bootstrap in us-east-1: run `npx cdk bootstrap`" in line for line in lines), lines
    assert any("capacity.ami: /spot-trainer/images/gpu does not resolve in us-east-1" in line for line in lines)
    assert any("'All G and VT Spot Instance Requests' (L-3819A6DF) is 0 in us-east-1; the job needs 8 "
               "(2 x g5.xlarge's 4 vCPUs)" in line for line in lines), lines
    assert lines[-1].endswith("5 problems") and len(lines) == 6

    (tmp_path / "cloud").mkdir()
    LocalCloud(tmp_path / "cloud", moto=account).bootstrap()
    image = client(account, "ec2").describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    client(account, "ssm").put_parameter(Name="/spot-trainer/images/gpu", Value=image, Type="String")
    client(account, "service-quotas").request_service_quota_increase(ServiceCode="ec2", QuotaCode="L-3819A6DF",
                                                                    DesiredValue=8)
    client(account, "ssm").put_parameter(Name="/team/hf", Value="hf_x", Type="SecureString")
    client(account, "secretsmanager").create_secret(Name="team/wandb", SecretString="w")
    assert preflight(account, job) == (0, ["preflight: SpotTrainer-gpu in us-east-1: nothing in the way"])


def test_an_instance_type_the_region_does_not_offer_is_named(account: MotoServer, tmp_path: Path) -> None:
    job = gpu_job(tmp_path, ami="/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64",
                  types='"g5.xlarge", "g4ad.xlarge"', nodes=1)
    client(account, "service-quotas").request_service_quota_increase(ServiceCode="ec2", QuotaCode="L-3819A6DF",
                                                                    DesiredValue=4)
    code, lines = preflight(account, job)
    assert code == 1
    assert "preflight: capacity.instance_types: g4ad.xlarge is not offered in any availability zone of us-east-1" \
        in lines
    assert not any("g5.xlarge is not offered" in line for line in lines)


def test_a_job_that_picks_its_network_at_deploy_needs_a_default_vpc_or_says_so(
    account: MotoServer, tmp_path: Path
) -> None:
    ec2 = client(account, "ec2")
    (vpc,) = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    for subnet in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc["VpcId"]]}])["Subnets"]:
        ec2.delete_subnet(SubnetId=subnet["SubnetId"])
    ec2.delete_vpc(VpcId=vpc["VpcId"])
    code, lines = preflight(account, JOBS_DIR / "example.toml")
    assert code == 1
    assert any("has no default VPC: pass --parameters VpcId=" in line for line in lines), lines


def test_a_job_of_several_regions_is_checked_in_each_it_may_move_to(account: MotoServer, tmp_path: Path) -> None:
    job = tmp_path / "moving.toml"
    job.write_text((JOBS_DIR / "example.toml").read_text().replace('subnets = "parameter"', 'subnets = "create"')
                   .replace("[capacity]\n", '[capacity]\nregions = ["us-east-1", "us-west-2"]\n'))
    (tmp_path / "cloud").mkdir()
    LocalCloud(tmp_path / "cloud", moto=account).bootstrap()  # home only
    code, lines = preflight(account, job)
    assert code == 1
    assert any("no CDK bootstrap in us-west-2: run `npx cdk bootstrap`" in line for line in lines), lines
    assert not any("in us-east-1:" in line for line in lines[:-1]), lines

    away = boto3.client("cloudformation", endpoint_url=account.endpoint, region_name="us-west-2",
                        aws_access_key_id="testing", aws_secret_access_key="testing")
    away.create_stack(StackName="CDKToolkit", TemplateBody='{"Resources": {"Handle": {"Type": '
                      '"AWS::CloudFormation::WaitConditionHandle"}}}')
    assert preflight(account, job) == (0, ["preflight: SpotTrainer-moving in us-east-1, us-west-2: nothing in the way"])
