"""The names a job gives to AWS, each rule written once for the job file, the console, the agent and the
job commands: the job's own name, its stack's and log group's names, and S3 bucket names.

Standard library only: the settings table's patterns, stacks/ and the agent import it.
"""

from __future__ import annotations

import re

# The job file's name: the stack's suffix (SpotTrainer-<job>), the job's S3 prefix (<job>/), its log group
# (/spot-trainer/<job>) and the longest name made from it, spot-trainer-<job>-capacity-watch (a Lambda
# function's, at most 64 characters).
JOB_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
JOB_NAME_RULE = "2-32 lowercase letters, digits or '-', starting with a letter"
_STACK_PREFIX = "SpotTrainer-"


def stack_name(job: str) -> str:
    """The job's CloudFormation stack (its home region's, for a job of several regions)."""
    return _STACK_PREFIX + job


def job_of_stack(stack: str) -> str | None:
    """The job a stack of this project is named for, or None for any other stack."""
    return stack.removeprefix(_STACK_PREFIX) if stack.startswith(_STACK_PREFIX) else None


def log_group_name(job: str) -> str:
    """The job's CloudWatch log group: one stream per instance."""
    return f"/spot-trainer/{job}"

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_ADDRESS = re.compile(r"^[0-9]+(\.[0-9]+){3}$")
RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")  # S3's bucket naming rules
RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", "--x-s3", "--table-s3")


def bucket_name_problem(name: str) -> str | None:
    """Why S3 would refuse `name` as a bucket name, or None: one rule for the job file, the agent and status."""
    if not _BUCKET.match(name) or ".." in name or _IP_ADDRESS.match(name):
        return (f"{name!r} is not an S3 bucket name (3-63 lowercase letters, digits, '.' or '-', starting "
                "and ending with a letter or digit, no '..', not an IP address)")
    if name.startswith(RESERVED_BUCKET_PREFIXES) or name.endswith(RESERVED_BUCKET_SUFFIXES):
        return f"{name!r} is not an S3 bucket name (S3 reserves its prefix or suffix)"
    return None


def regional_bucket_name(job: str, region: str, account: str) -> str:
    """The checkpoint bucket of `job` in `region` when the job lists several regions: a name every region's stack,
    agent and controller can compute, at most 32 + 1 + 12 + 1 + 14 characters, under S3's 63."""
    return f"{job}-{account}-{region}"
