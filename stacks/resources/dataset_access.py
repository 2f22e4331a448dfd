"""Read-only access to the dataset a job reads from S3, chosen by the DataBucket/DataPrefix parameters.

The policy exists only when a bucket is given, so the console can grant it (or take it away) as the
job file does: `run.data`, or the built-in trainer's `--data s3://…`, gives the parameters' defaults.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnCondition, CfnResource, Fn
from aws_cdk import aws_iam as iam
from constructs import Construct


class DatasetReadAccess(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, role: iam.IRole, bucket: str, prefix: str) -> None:
        super().__init__(scope, construct_id)
        self.condition = CfnCondition(self, "Given", expression=Fn.condition_not(Fn.condition_equals(bucket, "")))
        policy = iam.Policy(self, "Policy", roles=[role], statements=[
            iam.PolicyStatement(sid="ReadData", actions=["s3:GetObject"],
                                resources=[f"arn:{Aws.PARTITION}:s3:::{bucket}/{prefix}*"]),
            # The prefix ends in "/" (its parameter's pattern): "cifar/" lists cifar/ only, never cifar2/.
            iam.PolicyStatement(sid="ListData", actions=["s3:ListBucket"],
                                resources=[f"arn:{Aws.PARTITION}:s3:::{bucket}"],
                                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}}),
        ])
        resource = policy.node.default_child
        assert isinstance(resource, CfnResource)
        resource.cfn_options.condition = self.condition
