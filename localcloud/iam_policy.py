"""IAM's decision for one request against identity-based policies, as AWS documents it.

An explicit Deny wins; otherwise one Allow whose action, resource and conditions all match allows;
otherwise the request is denied implicitly. Actions match case-insensitively, resources
case-sensitively, both with `*` and `?` wildcards. A condition key the request does not carry makes a
positive operator false and a negated one true. Sources:
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html

Only the condition operators the stack's policies use are known here: any other is refused with its
name (the local spot cloud must not allow what it cannot judge).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ALLOWED, EXPLICIT_DENY, IMPLICIT_DENY = "allowed", "explicitly denied", "implicitly denied"


class UnknownOperator(ValueError):
    """A policy condition uses an operator this evaluator does not implement."""


@dataclass(frozen=True)
class Request:
    action: str  # service:Name, e.g. s3:PutObject
    resource: str  # the ARN the action acts on, or "*" for an action without a resource type
    context: Mapping[str, str]  # condition keys the request carries, e.g. {"s3:prefix": "job/"}


def _as_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _wildcard(pattern: str, value: str, *, ignore_case: bool) -> bool:
    regex = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")  # IAM's only wildcards
    return re.fullmatch(regex, value, re.IGNORECASE if ignore_case else 0) is not None


def _matches_any(patterns: Any, value: str, *, ignore_case: bool) -> bool:
    return any(_wildcard(p, value, ignore_case=ignore_case) for p in _as_list(patterns))


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, str]) -> bool:
    negated = operator in ("StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike")
    base = operator.replace("Not", "", 1) if negated else operator
    if base not in ("StringEquals", "StringLike", "ArnEquals", "ArnLike"):
        raise UnknownOperator(f"condition operator {operator} is not known to the local IAM")
    # Condition key names are case-insensitive; their values are not.
    actual = next((value for name, value in context.items() if name.lower() == key.lower()), None)
    if actual is None:
        return negated
    if base in ("ArnLike", "ArnEquals"):
        found = any(_arn_matches(v, actual) for v in _as_list(expected))
    elif base == "StringLike":
        found = any(_wildcard(v, actual, ignore_case=False) for v in _as_list(expected))
    else:
        found = actual in _as_list(expected)
    return found != negated


def _arn_matches(pattern: str, arn: str) -> bool:
    """ARN operators compare each of the six colon-delimited parts on its own: a wildcard never spans
    a colon of the first five."""
    wanted, found = pattern.split(":", 5), arn.split(":", 5)
    return len(wanted) == len(found) == 6 and all(
        _wildcard(w, f, ignore_case=False) for w, f in zip(wanted, found, strict=True))


def _statement_applies(statement: Mapping[str, Any], request: Request) -> bool:
    if "Action" in statement:
        if not _matches_any(statement["Action"], request.action, ignore_case=True):
            return False
    elif _matches_any(statement.get("NotAction", []), request.action, ignore_case=True):
        return False
    if "Resource" in statement:
        if not _matches_any(statement["Resource"], request.resource, ignore_case=False):
            return False
    elif _matches_any(statement.get("NotResource", []), request.resource, ignore_case=False):
        return False
    conditions: Mapping[str, Mapping[str, Any]] = statement.get("Condition", {})
    return all(_condition_holds(operator, key, expected, request.context)
               for operator, pairs in conditions.items() for key, expected in pairs.items())


def statements_of(documents: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    for document in documents:
        statement = document.get("Statement", [])
        found += statement if isinstance(statement, list) else [statement]
    return found


def decide(documents: Iterable[Mapping[str, Any]], request: Request) -> str:
    """ALLOWED, EXPLICIT_DENY or IMPLICIT_DENY for `request` under these policy documents."""
    applying = [s for s in statements_of(documents) if _statement_applies(s, request)]
    if any(s.get("Effect") == "Deny" for s in applying):
        return EXPLICIT_DENY
    return ALLOWED if any(s.get("Effect") == "Allow" for s in applying) else IMPLICIT_DENY


def grants(documents: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every action an Allow statement names (wildcards as written)."""
    return {action for s in statements_of(documents) if s.get("Effect") == "Allow"
            for action in _as_list(s.get("Action", []))}
