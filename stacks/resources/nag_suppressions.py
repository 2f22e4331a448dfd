"""cdk-nag AwsSolutions findings and checkov checks this design accepts, each with the reason it is
acceptable.

cdk-nag 3 acknowledges each finding exactly (no prefix matching), so IAM5 findings name the resource
strings the role really uses; a new wildcard therefore shows up as a fresh, unacknowledged finding.
Checkov reads its skips from the resource's own template Metadata, so the constructs call `skip_checkov`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations

# One reason per accepted risk, shared where two scanners flag the same thing.
NO_BUCKET_ACCESS_LOGS = ("Checkpoint objects are written only by the job's own role; CloudTrail data events "
                         "cover audit needs without a second logging bucket per job.")
WRITE_WITHOUT_RESOURCE = ("Session Manager's channel actions and ssm:UpdateInstanceInformation, and "
                          "cloudwatch:PutMetricData (held to the job's namespace by a condition), have no "
                          "resource-level permissions; every other write names this job's own resources.")
LOGS_WITHOUT_CUSTOMER_KEY = ("CloudWatch Logs already encrypts every log group at rest; a customer-managed KMS "
                             "key would add a monthly charge per job, a key policy for the logs service and a key "
                             "that outlives the stack, to guard training output that holds no secrets.")
TOPIC_WITHOUT_KMS = ("The job's topic carries job names, step counts and market switches only; an AWS-managed "
                     "key would stop CloudWatch alarms from publishing to it, and a customer-managed key costs "
                     "$1 a month per job.")
WATCH_WITHOUT_DLQ = ("The capacity watch runs every minute on a schedule: a failed run is redone by the next "
                     "one, so there is nothing for a dead-letter queue to keep.")
WATCH_OUTSIDE_VPC = ("The capacity watch calls only public AWS APIs (Auto Scaling, S3, SNS) and reaches nothing "
                     "inside the job's network.")
WATCH_ENV_NOT_KMS = ("The capacity watch's environment holds the group, bucket and job names, the topic ARN and "
                     "durations: nothing secret that a customer-managed key would guard.")
WATCH_NO_RESERVED_CONCURRENCY = ("One scheduled run a minute needs no reservation, and reserving any concurrency "
                                 "fails on accounts at Lambda's default limit of 10.")


def skip_checkov(resource: CfnResource, reasons: Mapping[str, str]) -> None:
    """Checkov skips on one resource (check id -> reason); checkov reports them with the reason."""
    resource.add_metadata("checkov", {"skip": [{"id": check, "comment": why} for check, why in reasons.items()]})


def _resolved(stack: Stack, token: str) -> str:
    """A token as cdk-nag writes it in a finding: the resolved intrinsic in compact JSON."""
    return json.dumps(stack.resolve(token), separators=(",", ":"))


def acknowledge_findings(stack: Stack, *, job: str, bucket_name: str,
                         group_name: str, created_vpc: bool, has_asset: bool,
                         data: tuple[str, str]) -> None:
    iam5 = "AwsSolutions::AwsSolutions-IAM5"
    acks = {
        "AwsSolutions::AwsSolutions-S1": NO_BUCKET_ACCESS_LOGS,
        f"{iam5}[Resource::arn:<AWS::Partition>:s3:::{_resolved(stack, bucket_name)}/{job}/*]":
        "Checkpoint object names are created at run time; access is confined to this job's prefix.",
        f"{iam5}[Resource::*]": "PutMetricData (scoped by a namespace condition), "
        "DescribeAutoScalingGroups, DescribeSpotPriceHistory and the five Session Manager actions support no "
        "resource-level permissions.",
        f"{iam5}[Resource::arn:<AWS::Partition>:s3:::{_resolved(stack, bucket_name)}/{job}/events/*]":
        "The capacity watch adds event records, named at run time, under this job's events/ prefix only.",
        "AwsSolutions::AwsSolutions-SNS2": TOPIC_WITHOUT_KMS,
        f"{iam5}[Resource::arn:<AWS::Partition>:autoscaling:<AWS::Region>:<AWS::AccountId>:autoScalingGroup:*:"
        f"autoScalingGroupName/{group_name}]":
            "The group's ARN holds a generated id; the name pins it to this job's group.",
        "AwsSolutions::AwsSolutions-EC23": "The SSH rule exists only when SshCidr is given, and both the job file "
        "and the parameter's AllowedPattern refuse a /0 range; the check cannot read a parameter.",
        "AwsSolutions::AwsSolutions-EC26": "The launch template sets Encrypted=true on the root volume; the check "
        "cannot follow a mixed instances policy.",
        "AwsSolutions::AwsSolutions-AS3": "Job progress and the end of the job are reported by the agent "
        "(status.json, events, CloudWatch Logs), not by scaling notifications.",
    }
    acks["CloudFormation-Validate::W1001"] = ("Only the bucket and its policy are conditional (no existing "
                                              "bucket given), and every reference to the bucket sits in an "
                                              "Fn::If on that same condition.")
    bucket, prefix = (stack.resolve(token)["Ref"] for token in data)  # the parameters' names
    acks[f"{iam5}[Resource::arn:<AWS::Partition>:s3:::<{bucket}>/<{prefix}>*]"] = (
        "Read-only, and only when DataBucket is given: the dataset the job names, object names unknown "
        "until it runs.")
    if created_vpc:
        acks["AwsSolutions::AwsSolutions-VPC7"] = ("The created VPC carries only training instances with no "
                                                   "inbound traffic; flow logs would cost more than they show.")
    if has_asset:
        acks["CloudFormation-Validate::W2001"] = ("The legacy synthesizer declares an artifact-hash parameter "
                                                  "for the job's code asset that the template does not need.")
    for rule_id, reason in acks.items():
        Validations.of(stack).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def acknowledge_regions_findings(stack: Stack, *, job: str, home_bucket: str, group_arns: list[str]) -> None:
    """The regions controller's: each listed region's group by name, and its move events in home's bucket."""
    iam5 = "AwsSolutions::AwsSolutions-IAM5"
    acks = {f"{iam5}[Resource::{_nag_text(stack, arn)}]": "The group's ARN holds a generated id; the name pins "
            "it to this job's group in that region." for arn in group_arns}
    acks[f"{iam5}[Resource::{_nag_text(stack, home_bucket)}/{job}/events/*]"] = (
        "The regions controller adds a move's event record, named at run time, under this job's events/ prefix.")
    for rule_id, reason in acks.items():
        Validations.of(stack).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def _nag_text(stack: Stack, text: str) -> str:
    """A string holding pseudo parameters as cdk-nag writes it in a finding: each as <AWS::Name>."""
    resolved = stack.resolve(text)
    if isinstance(resolved, str):
        return resolved
    return "".join(part if isinstance(part, str) else f"<{part['Ref']}>" for part in resolved["Fn::Join"][1])


def acknowledge_other_regions(stack: Stack, *, job: str, bucket_arns: tuple[str, ...]) -> None:
    """The instance role's reads of the job's prefix in its other regions' buckets."""
    for arn in bucket_arns:
        Validations.of(stack).acknowledge(Acknowledgment(
            id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{_nag_text(stack, arn)}/{job}/*]",
            reason="Read-only: a start restores the job's newest step from the region it was saved in; checkpoint "
                   "object names are made at run time, under this job's prefix only."))
