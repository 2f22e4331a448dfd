"""The local spot cloud's IAM decides as AWS documents: explicit deny wins, an allow must match action,
resource and every condition, anything else is denied."""

from __future__ import annotations

import pytest

from localcloud.iam_policy import ALLOWED, EXPLICIT_DENY, IMPLICIT_DENY, Request, UnknownOperator, decide

BUCKET = "arn:aws:s3:::ckpt"
JOB_OBJECTS = {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": f"{BUCKET}/job/*"}
LIST_JOB = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET,
            "Condition": {"StringLike": {"s3:prefix": ["job/*"]}}}


def policy(*statements: dict) -> list[dict]:
    return [{"Version": "2012-10-17", "Statement": list(statements)}]


def test_an_allow_covers_its_actions_on_its_resources_only() -> None:
    assert decide(policy(JOB_OBJECTS), Request("s3:PutObject", f"{BUCKET}/job/latest.json", {})) == ALLOWED
    assert decide(policy(JOB_OBJECTS), Request("s3:putobject", f"{BUCKET}/job/x", {})) == ALLOWED  # actions: any case
    assert decide(policy(JOB_OBJECTS), Request("s3:PutObject", f"{BUCKET}/other/x", {})) == IMPLICIT_DENY
    # ARNs match in their exact case
    assert decide(policy(JOB_OBJECTS), Request("s3:PutObject", f"{BUCKET}/JOB/x", {})) == IMPLICIT_DENY
    assert decide(policy(JOB_OBJECTS), Request("s3:DeleteObject", f"{BUCKET}/job/x", {})) == IMPLICIT_DENY


def test_a_condition_must_hold_and_a_missing_key_fails_it() -> None:
    assert decide(policy(LIST_JOB), Request("s3:ListBucket", BUCKET, {"s3:prefix": "job/checkpoints/"})) == ALLOWED
    assert decide(policy(LIST_JOB), Request("s3:ListBucket", BUCKET, {"s3:prefix": "other/"})) == IMPLICIT_DENY
    assert decide(policy(LIST_JOB), Request("s3:ListBucket", BUCKET, {})) == IMPLICIT_DENY
    # A failed condition in one statement does not deny what another statement allows.
    everything = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "*"}
    assert decide(policy(LIST_JOB, everything), Request("s3:ListBucket", BUCKET, {})) == ALLOWED


def test_a_negated_operator_holds_when_the_key_is_absent() -> None:
    not_other = {"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
                 "Condition": {"StringNotEquals": {"cloudwatch:namespace": "Other"}}}
    assert decide(policy(not_other), Request("cloudwatch:PutMetricData", "*", {})) == ALLOWED
    assert decide(policy(not_other), Request("cloudwatch:PutMetricData", "*",
                                             {"cloudwatch:namespace": "Other"})) == IMPLICIT_DENY


def test_an_explicit_deny_wins_over_any_allow() -> None:
    deny = {"Effect": "Deny", "NotAction": "s3:GetObject", "Resource": f"{BUCKET}/job/final/*"}
    assert decide(policy(JOB_OBJECTS, deny), Request("s3:PutObject", f"{BUCKET}/job/final/m.pt", {})) == EXPLICIT_DENY
    assert decide(policy(JOB_OBJECTS, deny), Request("s3:GetObject", f"{BUCKET}/job/final/m.pt", {})) == ALLOWED


def test_an_operator_it_cannot_judge_is_refused_by_name() -> None:
    dated = {**JOB_OBJECTS, "Condition": {"DateLessThan": {"aws:CurrentTime": "2099-01-01T00:00:00Z"}}}
    with pytest.raises(UnknownOperator, match="DateLessThan"):
        decide(policy(dated), Request("s3:GetObject", f"{BUCKET}/job/x", {}))


def test_condition_keys_match_in_any_case_and_arn_wildcards_stay_within_a_part() -> None:
    assert decide(policy(LIST_JOB), Request("s3:ListBucket", BUCKET, {"S3:Prefix": "job/a"})) == ALLOWED
    from_topic = {"Effect": "Allow", "Action": "sns:Publish", "Resource": "*",
                  "Condition": {"ArnLike": {"aws:SourceArn": "arn:aws:sns:*:123456789012:jobs"}}}
    assert decide(policy(from_topic), Request("sns:Publish", "*",
                                              {"aws:SourceArn": "arn:aws:sns:us-east-1:123456789012:jobs"})) == ALLOWED
    assert decide(policy(from_topic), Request("sns:Publish", "*", {
        "aws:SourceArn": "arn:aws:sns:us-east-1:999:x:123456789012:jobs"})) == IMPLICIT_DENY
