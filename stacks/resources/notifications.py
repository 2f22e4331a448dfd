"""The job's SNS topic: the agent, the capacity watch and the stall alarm publish to it; an e-mail
address subscribes only when the NotifyEmail parameter names one."""

from __future__ import annotations

from aws_cdk import Aws, CfnCondition, Fn
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.resources.nag_suppressions import TOPIC_WITHOUT_KMS, skip_checkov


class JobTopic(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, job: str, email: str) -> None:
        super().__init__(scope, construct_id)
        # Unencrypted on purpose (TOPIC_WITHOUT_KMS): an AWS-managed key would stop the alarm publishing.
        self.topic = sns.Topic(self, "Topic", display_name=f"Spot Trainer {job}", enforce_ssl=True)
        # A topic policy replaces SNS's default one, which was what let CloudWatch alarms publish.
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="JobAlarmsPublish",
            actions=["sns:Publish"],
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            resources=[self.topic.topic_arn],
            # This account's alarms only (the ARN names the account).
            conditions={"ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:"
                                                     f"{Aws.ACCOUNT_ID}:alarm:*"}},
        ))
        cfn_topic = self.topic.node.default_child
        assert isinstance(cfn_topic, sns.CfnTopic)
        skip_checkov(cfn_topic, {"CKV_AWS_26": TOPIC_WITHOUT_KMS})
        self.arn = self.topic.topic_arn
        self.email_given = CfnCondition(self, "EmailGiven", expression=Fn.condition_not(
            Fn.condition_equals(email, "")))
        subscription = sns.CfnSubscription(self, "Email", topic_arn=self.arn, protocol="email", endpoint=email)
        subscription.cfn_options.condition = self.email_given
