"""The checkpoint bucket: versioned, encrypted, SSL-only, private, kept when the stack goes."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct


class CheckpointBucket(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, noncurrent_days: int | float) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
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
