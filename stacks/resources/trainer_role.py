"""The instance role: exactly what the agent needs, scoped to this job's prefix, log group, group and topic."""

from __future__ import annotations

from aws_cdk import Aws, CfnResource
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.resources.nag_suppressions import WRITE_WITHOUT_RESOURCE, skip_checkov
from stacks.resources.spot_fleet import group_arn

SESSION_MANAGER_ACTIONS = ["ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel",
                           "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
                           "ssmmessages:OpenDataChannel"]


def s3_object_arn(uri: str) -> str:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return f"arn:{Aws.PARTITION}:s3:::{bucket}/{key}"


class TrainerRole(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job: str,
        bucket_arn: str,
        log_group_arn: str,
        group_name: str,
        metrics_namespace: str,
        topic_arn: str,
        readable_objects: list[str],
        other_buckets: tuple[str, ...] = (),
        lease_bucket: str | None = None,
    ) -> None:
        """A job of several regions: `other_buckets`, its buckets in its other regions, where a start reads the
        newest step from; `lease_bucket`, home's bucket where this region is not home, holding the job's lease."""
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"Spot Trainer instances of job {job}",
        )
        own_group = group_arn(group_name)
        statements = [
            iam.PolicyStatement(
                sid="JobCheckpoints",
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                resources=[f"{bucket_arn}/{job}/*"],
            ),
            iam.PolicyStatement(
                sid="ListJobPrefix",
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{job}/*"]}},  # not "job": it would match job2/
            ),
            iam.PolicyStatement(
                sid="JobLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group_arn],  # a log group's Arn ends in ":*": it covers the group's streams
            ),
            iam.PolicyStatement(
                sid="JobMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource ARN; the namespace condition scopes it
                conditions={"StringEquals": {"cloudwatch:namespace": metrics_namespace}},
            ),
            iam.PolicyStatement(
                # UpdateAutoScalingGroup: the deadline policy moves its own group between spot and on-demand.
                sid="OwnGroup",
                actions=["autoscaling:SetDesiredCapacity", "autoscaling:CompleteLifecycleAction",
                         "autoscaling:UpdateAutoScalingGroup"],
                resources=[own_group],
            ),
            iam.PolicyStatement(sid="JobNotifications", actions=["sns:Publish"], resources=[topic_arn]),
            iam.PolicyStatement(
                # Session Manager only (AWS's own AWSCloud9SSMInstanceProfile): AmazonSSMManagedInstanceCore
                # would also let training code read every SSM parameter of the account.
                sid="SessionManager",
                actions=SESSION_MANAGER_ACTIONS,
                resources=["*"],  # these actions support no resource-level permissions
            ),
            iam.PolicyStatement(
                # Its own group's market (the deadline watch), and the spot prices its instances paid (the
                # job's cost).
                sid="DescribeOwnGroup",
                actions=["autoscaling:DescribeAutoScalingGroups", "ec2:DescribeSpotPriceHistory"],
                resources=["*"],  # Describe* calls support no resource-level permissions
            ),
        ]
        if other_buckets:
            statements += [
                iam.PolicyStatement(sid="OtherRegionsCheckpoints", actions=["s3:GetObject"],
                                    resources=[f"{arn}/{job}/*" for arn in other_buckets]),
                iam.PolicyStatement(sid="OtherRegionsList", actions=["s3:ListBucket"], resources=list(other_buckets),
                                    conditions={"StringLike": {"s3:prefix": [f"{job}/*"]}}),
            ]
        if lease_bucket:  # conditional writes of the one object; its reads are among the other regions' above
            statements.append(iam.PolicyStatement(sid="HomeLease", actions=["s3:PutObject"],
                                                  resources=[f"{lease_bucket}/{job}/lease.json"]))
        if readable_objects:  # the trainer wheel and the job's code, object by object
            statements.append(
                iam.PolicyStatement(sid="JobArtifacts", actions=["s3:GetObject"], resources=readable_objects)
            )
        for statement in statements:
            self.role.add_to_policy(statement)
        policy = self.role.node.find_child("DefaultPolicy").node.default_child
        assert isinstance(policy, CfnResource)
        skip_checkov(policy, {"CKV_AWS_111": WRITE_WITHOUT_RESOURCE})
        self.policy = policy
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.role)

