"""The checkpoint bucket: versioned, encrypted, SSL-only, private, kept when the stack goes, or a
bucket the user already has (for example the one a destroyed stack of this job kept)."""

from __future__ import annotations

from aws_cdk import Aws, CfnCondition, CfnResource, Duration, Fn, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.resources.nag_suppressions import NO_BUCKET_ACCESS_LOGS, skip_checkov


class CheckpointBucket(Construct):
    """`name` and `arn` resolve to the created bucket, or to `existing_name` when that is not empty
    (then nothing is created: the bucket's own settings stay the owner's)."""

    def __init__(self, scope: Construct, construct_id: str, *, noncurrent_days: int | float,
                 existing_name: str, bucket_name: str | None = None) -> None:
        """`bucket_name`: the created bucket's name (None: CloudFormation makes one up)."""
        super().__init__(scope, construct_id)
        self.create = CfnCondition(self, "CreateBucket", expression=Fn.condition_equals(existing_name, ""))
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=bucket_name,
            versioned=True,  # an overwritten latest.json or checkpoint can still be recovered
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,  # checkpoints outlive `cdk destroy`
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
                s3.LifecycleRule(
                    id="expire-replaced-versions",
                    noncurrent_version_expiration=Duration.days(noncurrent_days),
                ),
            ],
        )
        for resource in (self.bucket.node.default_child, self.bucket.policy and self.bucket.policy.node.default_child):
            if isinstance(resource, CfnResource):
                resource.cfn_options.condition = self.create
        skip_checkov(self.bucket.node.default_child, {"CKV_AWS_18": NO_BUCKET_ACCESS_LOGS})
        self.name = Fn.condition_if(self.create.logical_id, self.bucket.bucket_name, existing_name).to_string()
        self.arn = f"arn:{Aws.PARTITION}:s3:::{self.name}"
