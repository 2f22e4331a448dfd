"""IAM enforced in moto for callers that hold a role, as AWS enforces it; moto itself allows every call.

An instance's agent and the capacity-watch Lambda sign with their role's temporary credentials (the
fake IMDS serves the instance's, as EC2 does; the player hands the Lambda its own). A request signed
with such credentials is checked here: its signature (moto's own check), then the role's policies as
the stack deployed them, with the request's real resource ARN and condition keys
(localcloud.iam_policy decides). A denied request gets AWS's AccessDenied error. Every decision is
appended as one JSON line to the file named by LOCALCLOUD_IAM_DECISIONS, so a run can say which
action was denied and which granted action nothing called. Callers with other credentials (the
deployer: the CDK CLI, the player, the tests) keep moto's default, unchecked.

Resources and condition keys per action follow the Service Authorization Reference
(https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html);
a log group's actions are matched on its ARN with the trailing `:*`, as CloudWatch Logs documents
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/iam-access-control-overview-cwl.html).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse
from xml.etree import ElementTree

from moto.autoscaling.models import autoscaling_backends
from moto.core.authorization import ActionAuthenticatorMixin
from moto.core.exceptions import JsonRESTError
from moto.iam.models import Policy, iam_backends
from moto.secretsmanager.models import secretsmanager_backends
from moto.sts.models import AssumedRole, sts_backends

from localcloud.iam_policy import ALLOWED, Request, UnknownOperator, decide
from localcloud.moto_server import DECISIONS_ENV

PARTITION = "aws"
# Actions IAM never checks (https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html).
UNCHECKED = {"sts:GetCallerIdentity"}
# A service whose signing name is not its IAM prefix (CloudWatch signs as "monitoring").
IAM_PREFIX = {"monitoring": "cloudwatch"}

_unchecked_authorize = ActionAuthenticatorMixin._authenticate_and_authorize_action
_record_lock = threading.Lock()


def _access_key_id(headers: Mapping[str, str]) -> str:
    authorization = headers.get("Authorization") or ""
    return authorization.partition("Credential=")[2].partition("/")[0]


def _assumed_role(account_id: str, access_key_id: str) -> AssumedRole | None:
    if not access_key_id:
        return None
    return next((r for r in sts_backends[account_id][PARTITION].assumed_roles
                 if r.access_key_id == access_key_id), None)


def _document(policy: Any) -> dict[str, Any]:
    if isinstance(policy, Policy):
        policy = next(v.document for v in policy.versions if v.is_default)
    return json.loads(policy) if isinstance(policy, str) else dict(policy)


def role_policies(account_id: str, role_name: str) -> list[dict[str, Any]]:
    """The role's inline and attached policy documents, as IAM holds them now."""
    iam = iam_backends[account_id][PARTITION]
    documents = [_document(iam.get_role_policy(role_name, name)[1]) for name in iam.list_role_policies(role_name)]
    attached, _ = iam.list_attached_role_policies(role_name)
    return documents + [_document(policy) for policy in attached]


def _param(response: Any, name: str) -> str:
    value = response._get_param(name)
    return str(value) if value is not None else ""


def _group_arn(account_id: str, region: str, name: str) -> str:
    group = autoscaling_backends[account_id][region].autoscaling_groups.get(name)
    if group is not None:
        return str(group.arn)
    return f"arn:{PARTITION}:autoscaling:{region}:{account_id}:autoScalingGroup:*:autoScalingGroupName/{name}"


def _secret_arn(account_id: str, region: str, secret_id: str) -> str:
    """The secret's ARN, with the random suffix Secrets Manager gave it; a name it does not hold as given."""
    if secret_id.startswith("arn:"):
        return secret_id
    store = secretsmanager_backends[account_id][region].secrets
    if secret_id in store:
        return str(store[secret_id].arn)
    return f"arn:{PARTITION}:secretsmanager:{region}:{account_id}:secret:{secret_id}"


def _deleted_keys(body: bytes) -> list[str]:
    """The object keys a DeleteObjects request names."""
    root = ElementTree.fromstring(body)
    return [element.text or "" for element in root.iter() if element.tag.rsplit("}", 1)[-1] == "Key"]


def requests_of(response: Any, action: str, moto_resource: str, region: str) -> list[Request]:
    """What AWS authorizes for this request: one action on one resource, except DeleteObjects, which
    needs s3:DeleteObject on each object it names
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html). Where AWS deletes the
    permitted keys and reports the others as AccessDenied, moto reports every key of a batch with one
    denied key so: stricter, never kinder."""
    if action == "s3:DeleteObject" and "delete" in response.querystring:
        return [Request(action, f"{moto_resource}/{key}", {}) for key in _deleted_keys(response.raw_body)]
    return [request_of(response, action, moto_resource, region)]


def request_of(response: Any, action: str, moto_resource: str, region: str) -> Request:
    """The resource ARN and condition keys AWS evaluates `action` against for this request."""
    service, _, name = action.partition(":")
    account = response.current_account
    if service == "s3":
        prefix = response.querystring.get("prefix", [None])[0] if name == "ListBucket" else None
        return Request(action, moto_resource, {"s3:prefix": prefix} if prefix is not None else {})
    if service == "autoscaling" and not name.startswith("Describe") and _param(response, "AutoScalingGroupName"):
        return Request(action, _group_arn(account, region, _param(response, "AutoScalingGroupName")), {})
    if service == "logs" and _param(response, "logGroupName"):
        group = f"arn:{PARTITION}:logs:{region}:{account}:log-group:{_param(response, 'logGroupName')}"
        stream = _param(response, "logStreamName")
        return Request(action, f"{group}:log-stream:{stream}" if stream else f"{group}:*", {})
    if action == "sns:Publish":
        return Request(action, _param(response, "TopicArn") or _param(response, "TargetArn"), {})
    if action == "ssm:GetParameter":  # `/team/x` → parameter/team/x, `x` → parameter/x
        parameter = _param(response, "Name").lstrip("/")
        return Request(action, f"arn:{PARTITION}:ssm:{region}:{account}:parameter/{parameter}", {})
    if action == "secretsmanager:GetSecretValue":
        return Request(action, _secret_arn(account, region, _param(response, "SecretId")), {})
    if action == "cloudwatch:PutMetricData":
        return Request(action, "*", {"cloudwatch:namespace": _param(response, "Namespace")})
    return Request(action, "*", {})


def _record(role: str, request: Request, decision: str) -> None:
    path = os.environ.get(DECISIONS_ENV)
    if not path:
        return
    line = json.dumps({"role": role, "action": request.action, "resource": request.resource,
                       "context": dict(request.context), "decision": decision})
    with _record_lock, open(path, "a") as out:
        out.write(line + "\n")


def _authorize(self: Any, iam_request_cls: type, resource: str = "*") -> None:
    role = _assumed_role(self.current_account, _access_key_id(self.headers))
    if role is None:
        _unchecked_authorize(self, iam_request_cls, resource)
        return
    path = self.raw_path + (f"?{urlparse(self.uri).query}" if urlparse(self.uri).query else "")
    checked = iam_request_cls(account_id=self.current_account, method=self.method, path=path, data=self.data,
                              body=self.raw_body, headers=self.headers, action=self._get_action())
    checked.check_signature()
    signing_name, _, name = checked._action.partition(":")
    checked._action = f"{IAM_PREFIX.get(signing_name, signing_name)}:{name}"  # named so in AccessDenied
    if checked._action in UNCHECKED:
        return
    role_name = role.role_arn.split("/")[-1]
    policies = role_policies(self.current_account, role_name)
    for request in requests_of(self, checked._action, resource, checked._region):
        try:
            decision = decide(policies, request)
        except UnknownOperator as error:
            decision = f"implicitly denied ({error})"
        _record(role_name, request, decision)
        if decision != ALLOWED:
            _refuse(self, checked, request)


def _refuse(response: Any, checked: Any, request: Request) -> None:
    """AccessDenied in the caller's protocol: JSON services (CloudWatch Logs) answer
    AccessDeniedException as JSON; moto's own error is XML, which only query and REST-XML clients read."""
    if "json" in (response.headers.get("Content-Type") or ""):
        arn = checked._access_key.arn
        raise JsonRESTError("AccessDeniedException", f"User: {arn} is not authorized to perform: "
                                                     f"{request.action} on resource: {request.resource}")
    checked._raise_access_denied()


def install() -> None:
    ActionAuthenticatorMixin._authenticate_and_authorize_action = _authorize  # type: ignore[method-assign]
