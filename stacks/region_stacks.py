"""Which stacks a job makes: one in the deploy region, or one per region of `capacity.regions`.

The first listed region is home: its stack is `SpotTrainer-<job>` and keeps the job's controller (the capacity
watch), its dashboard (a name CloudWatch keeps account-wide) and its group at `capacity.nodes`. Every other
region's stack, `SpotTrainer-<job>-<region>`, holds a bucket, a role, a log group and a group at 0 instances, so
that the job can move there without a deploy. No stack refers to another's outputs: a region's bucket has a
name every stack can compute (design: cross-region references are avoidable with deterministic names).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws

from spot_trainer.aws_names import regional_bucket_name
from stacks.job.spec import JobSpec


@dataclass(frozen=True)
class RegionStack:
    name: str  # the CloudFormation stack's name
    region: str | None  # None: the region `cdk deploy` is pointed at (a job of one region)
    home: bool
    several: bool  # the job lists more than one region

    regions: tuple[str, ...] = ()  # every region the job lists, home first

    def job_buckets(self, job: str) -> dict[str, str]:
        """Region → the job's bucket there, home first; {} for a job of one region."""
        return {region: regional_bucket_name(job, region, Aws.ACCOUNT_ID) for region in self.regions} \
            if self.several else {}

    def bucket_arns(self, job: str) -> tuple[tuple[str, ...], str | None]:
        """The job's buckets in the other regions, and home's where this is not home (its lease is there)."""
        arns = {region: f"arn:{Aws.PARTITION}:s3:::{name}" for region, name in self.job_buckets(job).items()}
        others = tuple(arn for region, arn in arns.items() if region != self.region)
        return others, None if self.home or not arns else arns[self.regions[0]]

    @property
    def standing_by(self) -> bool:
        """A region the job may move to: its group starts at 0 instances."""
        return not self.home


def region_stacks(job: JobSpec) -> list[RegionStack]:
    """Home first, then the other regions in the job file's order."""
    regions = job.capacity.regions
    if not regions:
        return [RegionStack(job.stack_name, None, home=True, several=False)]
    several = len(regions) > 1
    return [RegionStack(job.stack_name if i == 0 else f"{job.stack_name}-{region}", region, home=i == 0,
                        several=several, regions=regions) for i, region in enumerate(regions)]
