"""The regions controller of a job that lists several regions: a Lambda in the home region, run every minute,
that moves the job to the region with spot capacity (spot_trainer/capacity/region_controller.py). Its code is the
runtime's own wheel, shipped with the stack as an asset: a wheel is a zip with `spot_trainer/` at its top, which
is the layout Lambda loads a handler from.

Its role reaches each listed region's group and bucket by name (the groups share the job's name; the buckets'
names are computed, stacks/region_stacks.py), with no reference between the stacks."""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from spot_trainer.aws_names import regional_bucket_name
from stacks.resources.capacity_watch import RUNTIME
from stacks.resources.nag_suppressions import (
    WATCH_ENV_NOT_KMS,
    WATCH_NO_RESERVED_CONCURRENCY,
    WATCH_OUTSIDE_VPC,
    WATCH_WITHOUT_DLQ,
    acknowledge_regions_findings,
    skip_checkov,
)

HANDLER = "spot_trainer.capacity.region_controller.handler"


def controller_function_name(job: str) -> str:
    return f"spot-trainer-{job}-regions"


def regional_group_arn(region: str, name: str) -> str:
    return f"arn:{Aws.PARTITION}:autoscaling:{region}:{Aws.ACCOUNT_ID}:autoScalingGroup:*:autoScalingGroupName/{name}"


class RegionsController(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, job: str, regions: tuple[str, ...], group_name: str,
                 nodes: str, instance_types: str, region_wait: str, max_spot_wait: str, runtime: s3_assets.Asset,
                 topic_arn: str, log_group: str, log_group_arn: str) -> None:
        """`max_spot_wait`: with no spot capacity in any region, today's rule for going on-demand where the job is."""
        super().__init__(scope, construct_id)
        buckets = [f"arn:{Aws.PARTITION}:s3:::{regional_bucket_name(job, r, Aws.ACCOUNT_ID)}" for r in regions]
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"Spot Trainer regions controller of job {job}",
                        inline_policies={"RegionsController": self._policy(job, regions, group_name, buckets,
                                                                           topic_arn, log_group_arn)})
        self.function = lambda_.CfnFunction(
            self, "Function", function_name=controller_function_name(job), runtime=RUNTIME, handler=HANDLER,
            code=lambda_.CfnFunction.CodeProperty(s3_bucket=runtime.s3_bucket_name, s3_key=runtime.s3_object_key),
            role=role.role_arn, timeout=60, memory_size=256,
            logging_config=lambda_.CfnFunction.LoggingConfigProperty(log_group=log_group),
            environment=lambda_.CfnFunction.EnvironmentProperty(variables={
                "JOB": job, "REGIONS": ",".join(regions), "ACCOUNT": Aws.ACCOUNT_ID, "GROUP_NAME": group_name,
                "NODES": nodes, "INSTANCE_TYPES": instance_types, "REGION_WAIT": region_wait,
                "MAX_SPOT_WAIT": max_spot_wait,
                "TOPIC_ARN": topic_arn}),
        )
        skip_checkov(self.function, {"CKV_AWS_116": WATCH_WITHOUT_DLQ, "CKV_AWS_117": WATCH_OUTSIDE_VPC,
                                     "CKV_AWS_173": WATCH_ENV_NOT_KMS, "CKV_AWS_115": WATCH_NO_RESERVED_CONCURRENCY})
        rule = events.CfnRule(self, "EveryMinute", description=f"Runs the regions controller of Spot Trainer job {job}",
                              schedule_expression="rate(1 minute)", state="ENABLED",
                              targets=[events.CfnRule.TargetProperty(arn=self.function.attr_arn, id="Regions")])
        acknowledge_regions_findings(Stack.of(self), job=job, home_bucket=buckets[0],
                                     group_arns=[regional_group_arn(region, group_name) for region in regions])
        lambda_.CfnPermission(self, "InvokedBySchedule", action="lambda:InvokeFunction",
                              function_name=self.function.ref, principal="events.amazonaws.com",
                              source_arn=rule.attr_arn)

    @staticmethod
    def _policy(job: str, regions: tuple[str, ...], group_name: str, buckets: list[str], topic_arn: str,
                log_group_arn: str) -> iam.PolicyDocument:
        return iam.PolicyDocument(statements=[
            # Describe*, GetSpotPlacementScores and DescribeSpotPriceHistory (each region's price, for a tie)
            # support no resource-level permissions
            # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2autoscaling.html,
            # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html)
            iam.PolicyStatement(actions=["autoscaling:DescribeAutoScalingGroups",
                                         "autoscaling:DescribeScalingActivities", "ec2:GetSpotPlacementScores",
                                         "ec2:DescribeSpotPriceHistory"],
                                resources=["*"]),
            # SetDesiredCapacity moves the job; UpdateAutoScalingGroup sets its market where no region has spot
            iam.PolicyStatement(actions=["autoscaling:SetDesiredCapacity", "autoscaling:UpdateAutoScalingGroup"],
                                resources=[regional_group_arn(region, group_name) for region in regions]),
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{arn}/{job}/{name}" for arn in buckets
                                                                     for name in ("latest.json", "status.json")]),
            # GetObject of a key that is not there answers 404 (not 403) only with ListBucket
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=buckets,
                                conditions={"StringLike": {"s3:prefix": [f"{job}/*"]}}),
            iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"],
                                resources=[f"{buckets[0]}/{job}/regions.json"]),
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[f"{buckets[0]}/{job}/events/*"]),
            iam.PolicyStatement(actions=["sns:Publish"], resources=[topic_arn]),
            iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group_arn]),
        ])
