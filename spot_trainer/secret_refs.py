"""Secrets a job names by reference: `NAME=ssm:/path` (a Parameter Store SecureString) or
`NAME=secretsmanager:name` (a Secrets Manager secret). Only the references travel, in the job file, the
template and the instance's settings; the agent reads the values at start into the command's environment.

Torch-free and import-light: stacks/ checks the job file's references and grants read access to exactly
these with the same rules as the agent applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SSM = "ssm"
SECRETS_MANAGER = "secretsmanager"
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# Parameter Store: letters, digits and _.-/ (https://docs.aws.amazon.com/systems-manager/latest/userguide/
# sysman-paramstore-su-create.html); Secrets Manager: letters, digits and /_+=.@-
# (https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_CreateSecret.html).
SOURCE_NAME = {SSM: re.compile(r"/?[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*"),
               SECRETS_MANAGER: re.compile(r"[A-Za-z0-9/_+=.@\-]{1,512}")}
# What the agent itself gives the command (design: the contract with the training command), and its own.
RESERVED = ("CHECKPOINT_DIR", "RESUME_FROM", "JOB_NAME", "JOB_ATTEMPT", "PATH", "PYTHONPATH", "HOME")
FORM = '"NAME=ssm:/parameter/path" or "NAME=secretsmanager:secret-name"'


class SecretRefError(ValueError):
    """A reference that cannot be read; the message names it."""


@dataclass(frozen=True)
class SecretRef:
    env: str  # the command's environment variable
    service: str  # SSM or SECRETS_MANAGER
    name: str  # the parameter's or the secret's name

    def text(self) -> str:
        return f"{self.env}={self.service}:{self.name}"


def parse_ref(entry: str) -> SecretRef:
    env, equals, source = entry.partition("=")
    service, colon, name = source.partition(":")
    if not equals or not colon:
        raise SecretRefError(f"{entry!r} is not {FORM}")
    if not ENV_NAME.fullmatch(env):
        raise SecretRefError(f"{env!r} is not an environment variable name (capitals, digits and _)")
    if env in RESERVED or env.startswith(("SPOT_", "AWS_")):
        raise SecretRefError(f"{env} is set by the agent or AWS's tools; give the secret another name")
    if service not in SOURCE_NAME:
        raise SecretRefError(f"{entry!r}: the source is {service!r}; give ssm: or secretsmanager:")
    if not SOURCE_NAME[service].fullmatch(name):
        raise SecretRefError(f"{entry!r}: {name!r} is not a {service} name")
    return SecretRef(env, service, name)


def parse_refs(entries: Iterable[str]) -> list[SecretRef]:
    refs = [parse_ref(entry.strip()) for entry in entries if entry.strip()]
    names = [ref.env for ref in refs]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise SecretRefError(f"{twice[0]} is named twice")
    return refs


def refs_text(refs: Iterable[SecretRef]) -> str:
    """As the instance's settings carry them: `A=ssm:/x,B=secretsmanager:y` (no name holds a comma)."""
    return ",".join(ref.text() for ref in refs)


def refs_from_text(text: str) -> list[SecretRef]:
    return parse_refs(text.split(","))
