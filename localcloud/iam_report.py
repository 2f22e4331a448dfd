"""What IAM decided during a local run, per role: the calls it denied (each names its action and
resource) and the actions a role is granted that nothing called (candidates for removal)."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud.iam_policy import ALLOWED, grants


@dataclass(frozen=True)
class Decision:
    role: str
    action: str
    resource: str
    decision: str

    def line(self) -> str:
        return f"{self.role}: {self.action} on {self.resource} {self.decision}"


def decisions(path: Path) -> list[Decision]:
    if not path.exists():
        return []
    return [Decision(**{k: v for k, v in json.loads(line).items() if k != "context"})
            for line in path.read_text().splitlines() if line.strip()]


def role_documents(iam: Any, role_name: str) -> list[dict[str, Any]]:
    """The role's inline policy documents, read back through the IAM API."""
    names = iam.list_role_policies(RoleName=role_name)["PolicyNames"]
    return [_as_dict(iam.get_role_policy(RoleName=role_name, PolicyName=n)["PolicyDocument"]) for n in names]


def _as_dict(document: Any) -> dict[str, Any]:
    if not isinstance(document, str):
        return dict(document)
    try:
        return dict(json.loads(document))
    except json.JSONDecodeError:  # moto answers a template role's inline policy as Python's repr of it
        return dict(ast.literal_eval(document))


def stack_roles(iam: Any, stack: str) -> set[str]:
    """The roles `stack` has now (CloudFormation names them <stack>-<logical id>-<suffix>); an earlier
    deployment under the same name had others, deleted with it."""
    pages = iam.get_paginator("list_roles").paginate()
    return {role["RoleName"] for page in pages for role in page["Roles"] if role["RoleName"].startswith(f"{stack}-")}


def of_stack(path: Path, iam: Any, stack: str) -> list[Decision]:
    """The decisions on calls of the stack's current roles."""
    roles = stack_roles(iam, stack)
    return [decision for decision in decisions(path) if decision.role in roles]


def unused_grants(path: Path, iam: Any, stack: str) -> dict[str, list[str]]:
    """Per role of `stack` that made calls: the granted actions none of its calls used (an action
    granted by wildcard is never listed)."""
    called: dict[str, set[str]] = {}
    for decision in of_stack(path, iam, stack):
        called.setdefault(decision.role, set()).add(decision.action.lower())
    return {role: sorted(a for a in grants(role_documents(iam, role)) if a.lower() not in actions and "*" not in a)
            for role, actions in sorted(called.items())}


def summary_lines(path: Path, iam: Any, stack: str) -> list[str]:
    """For a run's report: how many calls IAM allowed the stack's roles, and what they never used."""
    calls = of_stack(path, iam, stack)
    lines = [f"IAM: {len(calls)} calls of the job's roles checked against their policies, "
             f"{sum(d.decision != ALLOWED for d in calls)} denied"]
    for role, actions in unused_grants(path, iam, stack).items():
        lines.append(f"IAM: {role} is granted and never called: {', '.join(actions) or 'nothing'}")
    return lines
