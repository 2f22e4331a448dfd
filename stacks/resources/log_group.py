"""The job's log group `/spot-trainer/<job>`: one stream per instance, retention by parameter."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import Construct

from spot_trainer.aws_names import log_group_name
from stacks.resources.nag_suppressions import LOGS_WITHOUT_CUSTOMER_KEY, skip_checkov


class JobLogGroup(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, job: str, retention_days: float) -> None:
        super().__init__(scope, construct_id)
        self.name = log_group_name(job)
        self.log_group = logs.CfnLogGroup(
            self, "LogGroup", log_group_name=self.name, retention_in_days=retention_days
        )
        self.log_group.apply_removal_policy(RemovalPolicy.DESTROY)
        skip_checkov(self.log_group, {"CKV_AWS_158": LOGS_WITHOUT_CUSTOMER_KEY})
        self.arn = self.log_group.attr_arn
