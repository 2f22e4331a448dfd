"""The values of the secrets a job names (secret_refs.py), read once at the agent's start for the command's
environment only: never logged, never in status.json, never in the agent's own environment.

A secret that the service answers about with an error ends the job, whatever the error: not there, not
allowed, not decryptable, or in a state that cannot be read, such as a Secrets Manager secret scheduled for
deletion (GetSecretValue answers InvalidRequestException: "The secret is scheduled for deletion",
https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html). No restart makes
it readable. Only what says AWS did not get to answer (throttling, the service's own internal errors, any
5xx, the network) is an ordinary failure, which a restart may get past: the agent's count of failed starts
bounds it (failed_starts.py).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ...secret_refs import SSM, SecretRef, SecretRefError, refs_from_text

# The codes of an answer not yet had: SSM's and Secrets Manager's throttling and internal errors
# (https://docs.aws.amazon.com/secretsmanager/latest/apireference/CommonErrors.html,
# https://docs.aws.amazon.com/systems-manager/latest/APIReference/CommonErrors.html) and expired
# instance credentials, which the SDK renews. Every other error code is the secret's own state.
PASSING_CODES = ("ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded",
                 "InternalServiceError", "InternalServerError", "InternalFailure", "InternalServiceFailure",
                 "ServiceUnavailable", "ServiceUnavailableException", "RequestTimeout", "RequestTimeoutException",
                 "ExpiredToken", "ExpiredTokenException", "RequestExpired")
# The fix for the states a user meets most, after the code.
FIXES = {
    "InvalidRequestException": "it is scheduled for deletion or cannot be read in its state: restore it "
                               "(aws secretsmanager restore-secret) or name another",
    **dict.fromkeys(("AccessDeniedException", "AccessDenied"), "the instance role may not read it: deploy the job "
                    "again with it in run.secrets, and check the secret's resource policy and its KMS key's"),
}


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
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        fix = f" ({FIXES[code]})" if code in FIXES else ""
        raise SecretError(f"secret {ref.env} ({ref.service}:{ref.name}) cannot be read: {code or error}{fix}",
                          final=code not in PASSING_CODES and status < 500) from None
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
