"""Read access to exactly the secrets a job names (run.secrets), on the instance role's own policy so it
exists before the first instance starts (the fleet depends on that policy).

ARNs: a parameter `/team/x` is `arn:…:ssm:R:A:parameter/team/x`, one without the slash `…:parameter/x`
(https://docs.aws.amazon.com/systems-manager/latest/userguide/sysman-paramstore-access.html); a secret's
ARN ends in `-` and six random characters, matched by `-??????`
(https://docs.aws.amazon.com/secretsmanager/latest/userguide/auth-and-access_examples.html). A SecureString
under the AWS managed key aws/ssm needs no kms:Decrypt of ours: that key lets every principal of the
account decrypt (https://docs.aws.amazon.com/systems-manager/latest/userguide/ps-restrict-decryption.html).
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

from spot_trainer.secret_refs import SSM, SecretRef


def secret_arn(ref: SecretRef) -> str:
    if ref.service == SSM:
        return f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}:{Aws.ACCOUNT_ID}:parameter/{ref.name.lstrip('/')}"
    return f"arn:{Aws.PARTITION}:secretsmanager:{Aws.REGION}:{Aws.ACCOUNT_ID}:secret:{ref.name}-??????"


def grant_secret_reads(role: iam.Role, refs: list[SecretRef]) -> None:
    """One statement per service, naming each secret; none when the job names none."""
    parameters = [secret_arn(ref) for ref in refs if ref.service == SSM]
    secrets = [secret_arn(ref) for ref in refs if ref.service != SSM]
    if parameters:
        role.add_to_policy(iam.PolicyStatement(sid="JobParameters", actions=["ssm:GetParameter"],
                                               resources=parameters))
    if secrets:
        role.add_to_policy(iam.PolicyStatement(sid="JobSecrets", actions=["secretsmanager:GetSecretValue"],
                                               resources=secrets))
