"""What would stop a job's first deploy, asked of AWS before anything is created: read-only calls with
your credentials, one line per problem.

    python -m stacks.preflight --job cifar

Checked: the CDK bootstrap a stack with assets needs, the image parameter resolving in the region, the
spot vCPU quota of each instance family class against nodes x vCPUs (new accounts often have 0 for G
and P), a default VPC for a job that picks its network at deploy time, each instance type offered
in some availability zone of the region, and each secret the job names (run.secrets) existing. A job that
lists regions (capacity.regions) is checked in each of them: it may be moved to any.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from spot_trainer.secret_refs import SSM, parse_refs
from stacks.help_text import first_paragraph
from stacks.job.spec import SHIPPED_TRAINER_PACKAGE, SSM_PATH, JobSpec, JobSpecError
from stacks.job_file import load_job
from stacks.synth.node_version import NODE_LINE

TOOLKIT_STACK = "CDKToolkit"
# EC2's spot vCPU quotas by instance family class (Service Quotas, service code "ec2").
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html
VCPU_QUOTAS_BY_CLASS = {
    "standard": ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
    "g": ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    "p": ("L-7212CCBC", "All P Spot Instance Requests"),
}

Clients = Callable[[str], Any]


def quota_class(instance_type: str) -> str | None:
    """The spot quota an instance type counts against, or None for one this check does not know."""
    family = instance_type.split(".")[0]
    if family.startswith(("g", "vt")):
        return "g"
    if family.startswith("p"):
        return "p"
    if family[0] in "acdhimrtz" and not family.startswith(("inf", "trn", "hpc", "dl")):  # those have their own
        return "standard"
    return None


def needs_bootstrap(job: JobSpec) -> bool:
    """A stack with an asset (the shipped runtime, the job's code) is published through the bootstrap."""
    return job.run.trainer_package == SHIPPED_TRAINER_PACKAGE or job.workdir_path is not None


def bootstrap_problem(job: JobSpec, clients: Clients, region: str) -> Iterator[str]:
    if not needs_bootstrap(job):
        return
    try:
        clients("cloudformation").describe_stacks(StackName=TOOLKIT_STACK)
    except ClientError as error:
        if "does not exist" not in str(error):
            raise
        yield (f"no CDK bootstrap in {region}: run `npx cdk bootstrap` once (the stack ships the runtime"
               f"{' and the job code' if job.workdir_path else ''} as assets)")


def image_problem(job: JobSpec, clients: Clients, region: str) -> Iterator[str]:
    if not SSM_PATH.match(job.capacity.ami):
        return
    try:
        clients("ssm").get_parameter(Name=job.capacity.ami)
    except ClientError as error:
        if error.response["Error"]["Code"] != "ParameterNotFound":
            raise
        yield f"capacity.ami: {job.capacity.ami} does not resolve in {region}: no such public parameter there"


def offering_problem(job: JobSpec, clients: Clients, region: str) -> Iterator[str]:
    pages = clients("ec2").get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": list(job.capacity.instance_types)}])
    offered = {offer["InstanceType"] for page in pages for offer in page["InstanceTypeOfferings"]}
    for missing in (t for t in job.capacity.instance_types if t not in offered):
        yield f"capacity.instance_types: {missing} is not offered in any availability zone of {region}"


def quota_problem(job: JobSpec, clients: Clients, region: str) -> Iterator[str]:
    described = clients("ec2").describe_instance_types(
        InstanceTypes=list(job.capacity.instance_types))["InstanceTypes"]
    vcpus = {item["InstanceType"]: int(item["VCpuInfo"]["DefaultVCpus"]) for item in described}
    for kind, (code, name) in VCPU_QUOTAS_BY_CLASS.items():
        types = [t for t in job.capacity.instance_types if quota_class(t) == kind and t in vcpus]
        if not types:
            continue
        largest = max(types, key=lambda t: vcpus[t])
        needed = job.capacity.nodes * vcpus[largest]
        value = clients("service-quotas").get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
        if value < needed:
            yield (f"spot vCPU quota '{name}' ({code}) is {value:g} in {region}; the job needs {needed} "
                   f"({job.capacity.nodes} x {largest}'s {vcpus[largest]} vCPUs): request an increase in "
                   "Service Quotas (it can take a day)")


def secret_problem(job: JobSpec, clients: Clients, region: str) -> Iterator[str]:
    """Each named secret exists; asked of its description only (DescribeParameters, DescribeSecret), so
    no value is ever read on this machine."""
    for ref in parse_refs(job.run.secrets):
        if ref.service == SSM:
            found = clients("ssm").describe_parameters(
                ParameterFilters=[{"Key": "Name", "Option": "Equals", "Values": [ref.name]}])["Parameters"]
            if not found:
                yield f"run.secrets: {ref.env}: no parameter {ref.name} in Parameter Store in {region}"
            continue
        try:
            clients("secretsmanager").describe_secret(SecretId=ref.name)
        except ClientError as error:
            if error.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            yield f"run.secrets: {ref.env}: no secret {ref.name} in Secrets Manager in {region}"


def network_problem(job: JobSpec, clients: Clients, region: str) -> Iterator[str]:
    if job.network.create or job.network.subnets:
        return
    vpcs = clients("ec2").describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        yield (f"the job picks its network at deploy time and {region} has no default VPC: pass "
               "--parameters VpcId=vpc-… --parameters Subnets=subnet-…,subnet-… to cdk deploy")


CHECKS = (bootstrap_problem, image_problem, offering_problem, quota_problem, network_problem, secret_problem)


def problems(job: JobSpec, clients: Clients, region: str) -> list[str]:
    found: list[str] = []
    for check in CHECKS:
        try:
            found += list(check(job, clients, region))
        except (BotoCoreError, ClientError) as error:
            found.append(f"{check.__name__.removesuffix('_problem')}: could not be checked: {error}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stacks.preflight", description=first_paragraph(__doc__))
    parser.add_argument("--job", required=True, help="a job name (jobs/NAME.toml) or a job file's path")
    options = parser.parse_args(argv)
    if NODE_LINE:  # loading the job starts the CDK's runtime on node
        print(f"preflight: note: {NODE_LINE}", file=sys.stderr)
    try:
        job = load_job(options.job)
    except JobSpecError as error:
        print(f"preflight: {error}", file=sys.stderr)
        return 2
    session = boto3.session.Session()
    if session.get_credentials() is None:
        print("preflight: no AWS credentials found (aws configure, or AWS_PROFILE)", file=sys.stderr)
        return 2
    regions = job.capacity.regions or (session.region_name or "us-east-1",)
    found = [line for region in regions for line in problems(job, _clients_in(session, region), region)]
    for line in found:
        print(f"preflight: {line}", file=sys.stderr)
    verdict = f"{len(found)} problem{'s' * (len(found) != 1)}" if found else "nothing in the way"
    print(f"preflight: {job.stack_name} in {', '.join(regions)}: {verdict}", file=sys.stderr)
    return 1 if found else 0


def _clients_in(session: boto3.session.Session, region: str) -> Clients:
    return lambda service: session.client(service, region_name=region)


if __name__ == "__main__":
    sys.exit(main())
