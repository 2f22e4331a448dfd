"""`capacity.regions` and `capacity.region_wait`: where the job may train, home first, and how long the active
region may run nothing before the job moves.

Each listed region gets a stack of its own, so what the job file names by id must exist in every one of them:
a subnet, a key pair, an existing bucket and an AMI id each live in one region, and are refused here with
several regions (an SSM parameter path such as the DLAMI's names the image in every region)."""

from __future__ import annotations

import re

from spot_trainer.aws_names import bucket_name_problem, regional_bucket_name
from spot_trainer.capacity.policy import parse_duration
from stacks.job.spec import AMI_ID, CapacitySpec, JobSpec, field_error

# Commercial, GovCloud and China partitions: "us-east-1", "us-gov-west-1", "cn-north-1", "ap-southeast-5".
# https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-regions.html
REGION_NAME = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}$")
# GetSpotPlacementScores scores at most 10 regions per call; one stable configuration per job is one call.
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_GetSpotPlacementScores.html
MAX_REGIONS = 10
# Shorter than a boot and a restore would be a move for every slow start.
SHORTEST_REGION_WAIT_SECONDS = 300.0


def check_regions(cap: CapacitySpec) -> None:
    """Names AWS knows the form of, each once, at most MAX_REGIONS; a region_wait that is a duration."""
    for region in cap.regions:
        if not REGION_NAME.match(region):
            raise field_error("capacity.regions", f"{region!r} is not a region name like us-east-1 or eu-west-1")
    if len(set(cap.regions)) != len(cap.regions):
        twice = next(region for region in cap.regions if cap.regions.count(region) > 1)
        raise field_error("capacity.regions", f"{twice} is listed twice")
    if len(cap.regions) > MAX_REGIONS:
        raise field_error("capacity.regions", f"{len(cap.regions)} regions; a job takes at most {MAX_REGIONS} (the "
                          "Spot placement score scores at most 10 regions at once)")
    try:
        wait = parse_duration(cap.region_wait)
    except ValueError as error:
        raise field_error("capacity.region_wait", str(error)) from None
    if wait < SHORTEST_REGION_WAIT_SECONDS:
        raise field_error("capacity.region_wait", f"{cap.region_wait} is shorter than a boot and a restore; give at "
                          "least 5m")


def check_regions_fit(job: JobSpec) -> None:
    """With several regions, nothing the job file names may belong to one region only."""
    if len(job.capacity.regions) < 2:
        return
    many = f"lives in one region, and this job lists {len(job.capacity.regions)}"
    if job.network.subnets:
        raise field_error("network.subnets", f'a subnet {many}: give "create" (each region\'s stack makes its own '
                          'VPC) or "parameter" (each stack\'s VPC and subnets chosen at deploy time)')
    if AMI_ID.match(job.capacity.ami):
        raise field_error("capacity.ami", f"an AMI id {many}: give an SSM parameter path, which names the image "
                          "in every region")
    if job.access.key_pair:
        raise field_error("access.key_pair", f"a key pair {many}: leave it out and use Session Manager")
    if job.storage.bucket:
        raise field_error("storage.bucket", f"a bucket {many}: leave it out, each region's stack makes its own")
    for region in job.capacity.regions:  # an account id is 12 digits: any stands in for the check
        if problem := bucket_name_problem(regional_bucket_name(job.name, region, account="123456789012")):
            raise field_error("name", f"{job.name!r} makes the bucket name of region {region} unusable: {problem}")


def home_region(job: JobSpec) -> str | None:
    """The region that holds the job's record and controller: the first listed, or None (the deploy region)."""
    return job.capacity.regions[0] if job.capacity.regions else None
