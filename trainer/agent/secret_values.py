"""The values of the secrets a job names (secret_refs.py), read once at the agent's start for the command's
environment only: never logged, never in status.json, never in the agent's own environment.

A secret that does not exist or that the role may not read ends the job (no restart makes it readable);
AWS not answering is an ordinary failure, which a restart may get past.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..secret_refs import SSM, SecretRef, SecretRefError, refs_from_text

# The services' codes for "no such secret" and "not allowed": nothing a restart changes.
FINAL_CODES = ("ParameterNotFound", "ParameterVersionNotFound", "ResourceNotFoundException", "AccessDenied",
               "AccessDeniedException", "DecryptionFailure", "InvalidKeyId", "KMSAccessDeniedException")


class SecretError(Exception):
    """One line naming the secret and why it cannot be had; `final` when no restart would help."""

    def __init__(self, message: str, *, final: bool) -> None:
        super().__init__(message)
        self.final = final


def read_one(ref: SecretRef, ssm: Any, secretsmanager: Any) -> str:
    """GetParameter with decryption (a SecureString comes back as text), or GetSecretValue's SecretString."""
    try:
        if ref.service == SSM:
            return str(ssm.get_parameter(Name=ref.name, WithDecryption=True)["Parameter"]["Value"])
        answer = secretsmanager.get_secret_value(SecretId=ref.name)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        raise SecretError(f"secret {ref.env} ({ref.service}:{ref.name}) cannot be read: {code or error}",
                          final=code in FINAL_CODES) from None
    except BotoCoreError as error:
        raise SecretError(f"secret {ref.env} ({ref.service}:{ref.name}) cannot be read: {error}", final=False) from None
    if "SecretString" not in answer:
        raise SecretError(f"secret {ref.env} (secretsmanager:{ref.name}) holds binary data, not text", final=True)
    return str(answer["SecretString"])


def secret_environment(text: str, clients: Any) -> dict[str, str]:
    """NAME → value for every reference in SPOT_SECRETS; `clients(service)` makes a client when one is needed."""
    try:
        refs = refs_from_text(text)
    except SecretRefError as error:
        raise SecretError(f"SPOT_SECRETS: {error}", final=True) from None
    if not refs:
        return {}
    ssm = clients("ssm") if any(ref.service == SSM for ref in refs) else None
    manager = clients("secretsmanager") if any(ref.service != SSM for ref in refs) else None
    return {ref.env: read_one(ref, ssm, manager) for ref in refs}
