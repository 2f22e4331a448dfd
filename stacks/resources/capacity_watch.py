"""The capacity watch: a Lambda run every minute that moves the group to on-demand when no agent can,
because no instance runs (no spot capacity for MaxSpotWait, or none while the job is behind its line
to the deadline). It exists only when MaxSpotWait or Deadline is given; its code is
spot_trainer/capacity/watch.py, inlined in the template. It logs into the job's own log group, beside the
instances, so one `aws logs tail` shows every switch.

The code travels zlib-compressed on one line, as the user data does (stacks/instance/user_data.py): as a YAML
block every line of it would be indented, and `cdk deploy` without a bootstrapped account takes at
most 50 KiB of YAML."""

from __future__ import annotations

import base64
import zlib
from pathlib import Path

from aws_cdk import CfnCondition, Fn
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from stacks.console.construct_values import WatchValues
from stacks.job.spec import JobSpecError
from stacks.resources.nag_suppressions import (
    WATCH_ENV_NOT_KMS,
    WATCH_NO_RESERVED_CONCURRENCY,
    WATCH_OUTSIDE_VPC,
    WATCH_WITHOUT_DLQ,
    skip_checkov,
)
from stacks.resources.spot_fleet import group_arn

WATCH_SOURCE = Path(__file__).resolve().parents[2] / "spot_trainer" / "capacity" / "watch.py"
MAX_INLINE_BYTES = 4096  # CloudFormation's limit on a Lambda's inline ZipFile code
# The newest Python runtime aws-cdk-lib knows: cdk-nag's AwsSolutions-L1 accepts no other.
RUNTIME = lambda_.Runtime.PYTHON_3_14.name


def watch_code(path: Path = WATCH_SOURCE) -> str:
    """The inline code: watch.py, run from its compressed text in the module Lambda loads (index)."""
    code = path.read_bytes()
    if len(code) > MAX_INLINE_BYTES:
        raise JobSpecError(f"{path}: {len(code)} bytes, over the {MAX_INLINE_BYTES} CloudFormation takes as a "
                           "Lambda's inline code")
    packed = base64.b64encode(zlib.compress(code, 9)).decode()
    return (f"# {path.parent.name}/{path.name}, zlib + base64 (see stacks/capacity_watch.py)\n"
            f"import base64, zlib; exec(compile(zlib.decompress(base64.b64decode('{packed}')), 'watch.py', 'exec'))\n")


def watch_function_name(job: str) -> str:
    return f"spot-trainer-{job}-capacity-watch"


class CapacityWatch(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, job: str, group_name: str, bucket_arn: str,
                 bucket_name: str, topic_arn: str, log_group: str, log_group_arn: str,
                 values: WatchValues) -> None:
        super().__init__(scope, construct_id)
        self.condition = CfnCondition(self, "Wanted", expression=Fn.condition_or(
            Fn.condition_not(Fn.condition_equals(values.max_spot_wait, "")),
            Fn.condition_not(Fn.condition_equals(values.deadline, ""))))
        policy = self._policy(job, bucket_arn, topic_arn, group_arn(group_name), log_group_arn)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"Spot Trainer capacity watch of job {job}",
                        inline_policies={"CapacityWatch": policy})
        self.function = lambda_.CfnFunction(
            self, "Function", function_name=watch_function_name(job), runtime=RUNTIME, handler="index.handler",
            code=lambda_.CfnFunction.CodeProperty(zip_file=watch_code()), role=role.role_arn,
            timeout=60, memory_size=128, logging_config=lambda_.CfnFunction.LoggingConfigProperty(log_group=log_group),
            environment=lambda_.CfnFunction.EnvironmentProperty(variables={
                "GROUP_NAME": group_name, "BUCKET": bucket_name, "JOB": job,
                "MAX_SPOT_WAIT": values.max_spot_wait, "DEADLINE": values.deadline,
                "DEADLINE_MARGIN": values.deadline_margin, "TOPIC_ARN": topic_arn}),
        )
        skip_checkov(self.function, {"CKV_AWS_116": WATCH_WITHOUT_DLQ, "CKV_AWS_117": WATCH_OUTSIDE_VPC,
                                     "CKV_AWS_173": WATCH_ENV_NOT_KMS, "CKV_AWS_115": WATCH_NO_RESERVED_CONCURRENCY})
        self.rule = events.CfnRule(
            self, "EveryMinute", description=f"Runs the capacity watch of Spot Trainer job {job}",
            schedule_expression="rate(1 minute)", state="ENABLED",
            targets=[events.CfnRule.TargetProperty(arn=self.function.attr_arn, id="CapacityWatch")])
        permission = lambda_.CfnPermission(self, "InvokedBySchedule", action="lambda:InvokeFunction",
                                           function_name=self.function.ref, principal="events.amazonaws.com",
                                           source_arn=self.rule.attr_arn)
        cfn_role = role.node.default_child
        assert isinstance(cfn_role, iam.CfnRole)
        for resource in (cfn_role, self.function, self.rule, permission):
            resource.cfn_options.condition = self.condition

    @staticmethod
    def _policy(job: str, bucket_arn: str, topic_arn: str, own_group: str, log_group_arn: str) -> iam.PolicyDocument:
        return iam.PolicyDocument(statements=[
            iam.PolicyStatement(actions=["autoscaling:DescribeAutoScalingGroups"],
                                resources=["*"]),  # Describe* calls support no resource-level permissions
            iam.PolicyStatement(actions=["autoscaling:UpdateAutoScalingGroup"],
                                resources=[own_group]),
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{bucket_arn}/{job}/*"]),
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn],
                                conditions={"StringLike": {"s3:prefix": [f"{job}/*"]}}),
            iam.PolicyStatement(actions=["s3:PutObject"],
                                resources=[f"{bucket_arn}/{job}/events/*"]),
            iam.PolicyStatement(actions=["sns:Publish"], resources=[topic_arn]),
            iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                resources=[log_group_arn]),
        ])

