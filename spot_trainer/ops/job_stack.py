"""A deployed job's resources, read from the outputs of its stack `SpotTrainer-<job>`.

DescribeStacks answers a ValidationError for a stack that does not exist
(https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html); a stack in
any *_IN_PROGRESS, failed or deleted state has outputs that cannot be trusted, and is named as such
(states: https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_Stack.html).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from botocore.exceptions import BotoCoreError, ClientError

from ..aws_names import JOB_NAME, JOB_NAME_RULE, job_of_stack, log_group_name, stack_name
from .aws_access import aws_errors
from .problem import JobProblem

USABLE = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE")
CREATING = ("CREATE_IN_PROGRESS", "REVIEW_IN_PROGRESS")
# Every stack state but DELETE_COMPLETE, which ListStacks keeps for 90 days
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_ListStacks.html).
LIVE_STATES = ["CREATE_IN_PROGRESS", "CREATE_FAILED", "CREATE_COMPLETE", "ROLLBACK_IN_PROGRESS", "ROLLBACK_FAILED",
               "ROLLBACK_COMPLETE", "DELETE_IN_PROGRESS", "DELETE_FAILED", "UPDATE_IN_PROGRESS",
               "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_COMPLETE", "UPDATE_FAILED", "UPDATE_ROLLBACK_IN_PROGRESS",
               "UPDATE_ROLLBACK_FAILED", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_ROLLBACK_COMPLETE",
               "REVIEW_IN_PROGRESS", "IMPORT_IN_PROGRESS", "IMPORT_COMPLETE", "IMPORT_ROLLBACK_IN_PROGRESS",
               "IMPORT_ROLLBACK_FAILED", "IMPORT_ROLLBACK_COMPLETE"]
LISTED_PAGES = 20  # at 100 stacks a page: a suggestion, not worth a long wait in a large account
CLOSE = 0.6  # difflib's ratio: `cnnn`/`cnn` and `cifr`/`cifar` pass


@dataclass(frozen=True)
class JobStack:
    job: str
    region: str
    bucket: str
    group: str  # "" for a stack that is gone (--bucket): no group to pause or resume
    log_group: str

    @property
    def dashboard_url(self) -> str:
        """The stack's dashboard `spot-trainer-<job>` (stacks/resources/dashboard.py) in the CloudWatch console."""
        name = quote(f"spot-trainer-{self.job}")
        return f"https://{self.region}.console.aws.amazon.com/cloudwatch/home?region={self.region}#dashboards:name={name}"


def check_job_name(job: str) -> str:
    if not JOB_NAME.match(job):
        raise JobProblem(f"--job {job!r} is not a job name ({JOB_NAME_RULE}: the name of its job file, e.g. cifar)")
    return job


def find_job_stack(cloudformation: Any, job: str, region: str) -> JobStack:
    """The job's bucket, group and log group from its stack, or one line saying why they cannot be had."""
    name = stack_name(check_job_name(job))
    with aws_errors(f"cannot read stack {name}"):
        try:
            stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        except ClientError as error:
            if "does not exist" not in str(error):
                raise
            raise JobProblem(f"no stack {name} in {region}: {_other_jobs(cloudformation, job)}deploy it with "
                             f"`npx cdk deploy -c job={job}`, or give --bucket for a job whose stack is gone"
                             ) from error
    state = str(stack["StackStatus"])
    if state not in USABLE:
        later = "; try again once it is CREATE_COMPLETE" if state in CREATING else ": its resources cannot be used"
        raise JobProblem(f"stack {name} is {_state_words(state)} ({state}){later}")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    missing = [key for key in ("CheckpointBucket", "AutoScalingGroup", "LogGroup") if key not in outputs]
    if missing:
        raise JobProblem(f"stack {name} has no {missing[0]} output: is it a Spot Trainer stack?")
    return JobStack(job=job, region=region, bucket=outputs["CheckpointBucket"], group=outputs["AutoScalingGroup"],
                    log_group=outputs["LogGroup"])


def job_by_bucket(job: str, bucket: str, region: str) -> JobStack:
    """A job whose stack is gone: its records in `bucket`, its log group by the stack's naming."""
    return JobStack(job=check_job_name(job), region=region, bucket=bucket, group="", log_group=log_group_name(job))


def job_names(cloudformation: Any) -> list[str]:
    """The jobs whose stacks exist in the region (every state but deleted), by ListStacks' pages, at most
    LISTED_PAGES of them; [] when they cannot be listed (ListStacks is not a permission the commands need)."""
    names: list[str] = []
    try:
        pages = cloudformation.get_paginator("list_stacks").paginate(StackStatusFilter=LIVE_STATES)
        for _, page in zip(range(LISTED_PAGES), pages, strict=False):
            names += [job for s in page.get("StackSummaries", [])
                      if (job := job_of_stack(str(s.get("StackName", "")))) is not None]
    except (ClientError, BotoCoreError):
        return []
    return sorted(set(names))


def _other_jobs(cloudformation: Any, job: str) -> str:
    """`did you mean --job cnn? ` for a name close to a job that is deployed here, else ""."""
    close = difflib.get_close_matches(job, job_names(cloudformation), n=1, cutoff=CLOSE)
    return f"did you mean --job {close[0]}? Else " if close else ""


def _state_words(state: str) -> str:
    if state.startswith("DELETE"):
        return "being deleted" if state.endswith("IN_PROGRESS") else "deleted or failed to delete"
    if state in CREATING:
        return "being created"
    if state.endswith("IN_PROGRESS"):
        return "being updated or rolled back"
    return "in a failed state"
