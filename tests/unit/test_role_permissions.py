"""Every AWS call the runtime makes is granted to the identity that makes it, and every grant is used.

moto allows every call; AWS answers AccessDenied for any action the caller's policies do not name. The
calls are read from the code: each boto3 client method, paginator and s3transfer helper named in
spot_trainer/ (the agent on an instance; spot_trainer/capacity/watch.py runs as the capacity-watch Lambda). The
grants are read from the synthesized template. Action names follow the Service Authorization Reference:
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html (HeadObject needs
s3:GetObject, ListObjectsV2 s3:ListBucket, DeleteObjects s3:DeleteObject, a multipart upload
s3:PutObject) and list_amazonec2autoscaling.html (Describe* take no resource: "*").
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore import xform_name

from localcloud.iam_policy import ALLOWED, IMPLICIT_DENY, Request, decide
from tests.unit.stack_support import REPO, Synthesized

SERVICES = {"s3": "s3", "autoscaling": "autoscaling", "logs": "logs", "cloudwatch": "cloudwatch", "ec2": "ec2",
            "sns": "sns"}
S3_ACTIONS = {"HeadObject": "s3:GetObject", "ListObjectsV2": "s3:ListBucket", "DeleteObjects": "s3:DeleteObject"}
# s3transfer's managed transfers: an upload may be multipart (and aborted on failure), a download is GETs.
TRANSFER_ACTIONS = {"upload": {"s3:PutObject", "s3:AbortMultipartUpload"}, "download": {"s3:GetObject"},
                    "upload_file": {"s3:PutObject", "s3:AbortMultipartUpload"}, "download_file": {"s3:GetObject"}}
LAMBDA_MODULES = {"spot_trainer/capacity/watch.py"}
# The regions controller's Lambda (a job of several regions; tests/unit/test_region_stacks.py checks its role).
REGIONS_MODULES = {"spot_trainer/capacity/region_controller.py", "spot_trainer/capacity/on_demand_handover.py",
                   *(str(p.relative_to(REPO)) for p in (REPO / "spot_trainer" / "capacity" / "regions").glob("*.py"))}
# The user's commands on a deployed job run on the user's machine with the user's own credentials (what
# they need: docs/operations.md), never with an instance's role.
USER_MODULES = {str(p.relative_to(REPO)) for p in (REPO / "spot_trainer" / "ops").glob("*.py")}
# Granted for a caller that is not our code: the image's SSM agent (Session Manager) on an instance, the
# Lambda runtime writing the function's own log stream.
SSM_AGENT = {"ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel",
             "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"}
LAMBDA_RUNTIME = {"logs:CreateLogStream", "logs:PutLogEvents"}


@cache
def operations() -> dict[str, list[str]]:
    """boto3 method name → the IAM actions of every service we call that has such an operation."""
    session, actions = botocore.session.get_session(), {}
    for service, prefix in SERVICES.items():
        for operation in session.get_service_model(service).operation_names:
            action = S3_ACTIONS.get(operation, f"{prefix}:{operation}") if service == "s3" else f"{prefix}:{operation}"
            actions.setdefault(xform_name(operation), []).append(action)
    return actions


def calls_in(path: Path) -> Iterator[tuple[int, str, set[str]]]:
    """(line, what is called, the actions it needs) for each AWS call in one module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant):
            name = str(node.args[0].value)
        managed = name in ("upload", "download") and "manager" in ast.unparse(node.func.value)
        if managed or name in ("upload_file", "download_file"):
            yield node.lineno, name, TRANSFER_ACTIONS[name]
        elif name in operations():
            found = operations()[name]
            assert len(found) == 1, f"{path}:{node.lineno}: {name} is an operation of several services: {found}"
            yield node.lineno, name, set(found)


def needed(modules: set[str] | None, exclude: set[str] | None = None) -> dict[str, list[str]]:
    """IAM action → where the code calls it."""
    files = sorted((REPO / "spot_trainer").rglob("*.py"))
    chosen = [p for p in files if (modules is None or str(p.relative_to(REPO)) in modules)
              and str(p.relative_to(REPO)) not in (exclude or set())]
    where: dict[str, list[str]] = {}
    for path in chosen:
        for line, name, actions in calls_in(path):
            for action in actions:
                where.setdefault(action, []).append(f"{path.relative_to(REPO)}:{line} {name}")
    return where


def role_statements(synth: Synthesized, principal: str, who: str = "") -> list[dict[str, Any]]:
    """Every statement of the policies attached to the one role that `principal` assumes (of several, the one
    whose description names `who`: a job of several regions has two Lambda roles)."""
    found = [(logical, resource["Properties"]) for logical, resource in synth.resources("AWS::IAM::Role").items()
             if principal in str(resource["Properties"]["AssumeRolePolicyDocument"])]
    ((role, properties),) = found if len(found) == 1 else [
        (logical, properties) for logical, properties in found if who in properties.get("Description", "")]
    statements = [s for inline in properties.get("Policies", []) for s in inline["PolicyDocument"]["Statement"]]
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def granted(statements: list[dict[str, Any]]) -> set[str]:
    actions: set[str] = set()
    for statement in statements:
        listed = statement["Action"]
        actions |= {listed} if isinstance(listed, str) else set(listed)
    return actions


# (who, its principal, the modules it runs (None: all but `exclude`), modules it does not run, what others call)
ROLES = [("instance", "ec2.amazonaws.com", None, LAMBDA_MODULES | USER_MODULES | REGIONS_MODULES, SSM_AGENT),
         ("capacity watch", "lambda.amazonaws.com", LAMBDA_MODULES, set(), LAMBDA_RUNTIME)]
ROLE_FIELDS = ("who", "principal", "modules", "exclude", "others")


@pytest.mark.parametrize(ROLE_FIELDS, ROLES, ids=[r[0] for r in ROLES])
def test_every_call_is_granted(synthesized: dict[str, Synthesized], who: str, principal: str,
                               modules: set[str] | None, exclude: set[str], others: set[str]) -> None:
    calls = needed(modules, exclude)
    assert calls, "the scan found no AWS call at all"
    for job, synth in synthesized.items():
        missing = {action: where for action, where in calls.items()
                   if action not in granted(role_statements(synth, principal, who))}
        assert not missing, f"{job}: the {who} role lacks {sorted(missing)}, called at {missing}"


@pytest.mark.parametrize(ROLE_FIELDS, ROLES, ids=[r[0] for r in ROLES])
def test_every_grant_is_called(synthesized: dict[str, Synthesized], who: str, principal: str,
                               modules: set[str] | None, exclude: set[str], others: set[str]) -> None:
    calls = needed(modules, exclude)
    unused = granted(role_statements(synthesized["example"], principal)) - set(calls) - others
    assert not unused, f"the {who} role grants {sorted(unused)}, which no code calls"


def test_describe_calls_are_granted_on_every_resource(synthesized: dict[str, Synthesized]) -> None:
    """Describe* actions support no resource-level permissions: granted on a group's ARN, they are denied."""
    for principal in ("ec2.amazonaws.com", "lambda.amazonaws.com"):
        for statement in role_statements(synthesized["example"], principal):
            listed = statement["Action"]
            described = [a for a in ([listed] if isinstance(listed, str) else listed) if ":Describe" in a]
            assert not described or statement["Resource"] == "*", statement


def test_the_scan_sees_calls_through_paginators_and_transfers() -> None:
    """The reading of the code itself: a paginator is its operation, a managed upload a PUT."""
    calls = needed(None)
    assert any("describe_spot_price_history" in where for where in calls["ec2:DescribeSpotPriceHistory"])
    assert any("upload" in where for where in calls["s3:PutObject"])
    assert "s3:ListBucket" in calls


def test_the_instance_policy_exists_before_the_group_and_outlives_it(synthesized: dict[str, Synthesized]) -> None:
    """CloudFormation deletes in reverse dependency order: without the tie, `cdk destroy` may delete the
    policy while an instance still drains, and its last upload and CompleteLifecycleAction are denied."""
    for job, synth in synthesized.items():
        (policy,) = [logical for logical, resource in synth.resources("AWS::IAM::Policy").items()
                     if "Condition" not in resource and "JobCheckpoints" in str(resource)]
        (group,) = synth.resources("AWS::AutoScaling::AutoScalingGroup").values()
        assert policy in group.get("DependsOn", []), job


# The environment cache calls S3 through the aws CLI (the image's python3 has no boto3), which the scan
# above does not see: its calls are judged by the local spot cloud's IAM evaluator against the role.
CACHE_BUCKET = "CheckpointsBucket6BA0C50D"  # the created bucket's Ref, as the resolver below names it
# What spot_trainer.environment calls, per object: the record read (and replaced with If-Match, which
# needs s3:GetObject too), the archive downloaded, uploaded (multipart when large) and, by an instance
# that lost the race, removed; a missing record reads as 404, not 403, only with s3:ListBucket.
CACHE_CALLS = [("s3:GetObject", "env.json"), ("s3:PutObject", "env.json"), ("s3:GetObject", "abc.tar.gz"),
               ("s3:PutObject", "abc.tar.gz"), ("s3:AbortMultipartUpload", "abc.tar.gz"),
               ("s3:DeleteObject", "abc.tar.gz")]


def resolved(value: Any) -> Any:
    """A template value as a string: joins joined, the partition `aws`, a condition's first branch, a
    Ref its logical name."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolved(part)) for part in parts)
    if isinstance(value, dict) and "Fn::If" in value:
        return resolved(value["Fn::If"][1])
    if isinstance(value, dict) and "Ref" in value:
        return "aws" if value["Ref"] == "AWS::Partition" else value["Ref"]
    if isinstance(value, list):
        return [resolved(item) for item in value]
    if isinstance(value, dict):
        return {key: resolved(item) for key, item in value.items()}
    return value


def test_the_instance_role_allows_the_environment_cache_on_its_job_prefix_only(
    synthesized: dict[str, Synthesized],
) -> None:
    documents = [{"Statement": resolved(role_statements(synthesized["example"], "ec2.amazonaws.com"))}]
    prefix = f"arn:aws:s3:::{CACHE_BUCKET}/example/env-cache/0123abcd"
    for action, name in CACHE_CALLS:
        assert decide(documents, Request(action, f"{prefix}/{name}", {})) == ALLOWED, (action, name)
    listing = Request("s3:ListBucket", f"arn:aws:s3:::{CACHE_BUCKET}",
                      {"s3:prefix": "example/env-cache/0123abcd/env.json"})
    assert decide(documents, listing) == ALLOWED
    # Another job's cache in the same bucket stays out of reach.
    assert decide(documents, Request("s3:GetObject", f"arn:aws:s3:::{CACHE_BUCKET}/other/env-cache/x/env.json", {})) \
        == IMPLICIT_DENY
