"""The credentials AWS hands a role's holder: an instance through its instance profile (served by its
IMDS), a Lambda function through its execution role (in its environment). Both are temporary
credentials of an assumed role, which moto's IAM stand-in (localcloud/moto_iam.py) checks against
the role's own policies."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from localcloud.fake_imds import RoleCredentials


def assume(sts: Any, role_arn: str, session_name: str) -> RoleCredentials:
    found = sts.assume_role(RoleArn=role_arn, RoleSessionName=session_name)["Credentials"]
    return RoleCredentials(
        role_name=role_arn.rsplit("/", 1)[-1], access_key_id=found["AccessKeyId"],
        secret_access_key=found["SecretAccessKey"], token=found["SessionToken"],
        expiration=found["Expiration"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def instance_profile_role(iam: Any, profile_arn_or_name: str) -> str:
    """The ARN of the role in an instance profile (EC2 allows exactly one)."""
    profile = iam.get_instance_profile(InstanceProfileName=profile_arn_or_name.rsplit("/", 1)[-1])
    return str(profile["InstanceProfile"]["Roles"][0]["Arn"])


def lambda_environment(credentials: RoleCredentials) -> dict[str, str]:
    """What Lambda puts in a function's environment for its execution role
    (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime)."""
    return {"AWS_ACCESS_KEY_ID": credentials.access_key_id, "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key,
            "AWS_SESSION_TOKEN": credentials.token}
