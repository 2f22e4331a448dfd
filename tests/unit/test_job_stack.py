"""A job's stack read by name: every state whose outputs cannot be used is one line naming the state."""

from __future__ import annotations

from typing import Any

import pytest

from spot_trainer.ops.job_stack import find_job_stack
from spot_trainer.ops.problem import JobProblem

OUTPUTS = [{"OutputKey": "CheckpointBucket", "OutputValue": "b"}, {"OutputKey": "AutoScalingGroup", "OutputValue": "g"},
           {"OutputKey": "LogGroup", "OutputValue": "/spot-trainer/cifar"}]


class OneStack:
    """DescribeStacks answering with one stack in `state`."""

    def __init__(self, state: str) -> None:
        self.state = state

    def describe_stacks(self, StackName: str) -> dict[str, Any]:  # noqa: N803 - boto3's spelling
        return {"Stacks": [{"StackName": StackName, "StackStatus": self.state, "Outputs": OUTPUTS}]}


@pytest.mark.parametrize(("state", "words"), [
    ("CREATE_IN_PROGRESS", "is being created (CREATE_IN_PROGRESS); try again once it is CREATE_COMPLETE"),
    ("DELETE_IN_PROGRESS", "is being deleted (DELETE_IN_PROGRESS): its resources cannot be used"),
    ("DELETE_FAILED", "is deleted or failed to delete (DELETE_FAILED): its resources cannot be used"),
    ("ROLLBACK_COMPLETE", "is in a failed state (ROLLBACK_COMPLETE): its resources cannot be used"),
    ("UPDATE_IN_PROGRESS", "is being updated or rolled back (UPDATE_IN_PROGRESS): its resources cannot be used"),
])
def test_a_stack_in_a_passing_or_failed_state_is_named(state: str, words: str) -> None:
    with pytest.raises(JobProblem) as caught:
        find_job_stack(OneStack(state), "cifar", "eu-west-1")
    assert str(caught.value) == f"stack SpotTrainer-cifar {words}"


def test_a_usable_stack_gives_its_outputs_and_dashboard() -> None:
    job = find_job_stack(OneStack("UPDATE_COMPLETE"), "cifar", "eu-west-1")
    assert (job.bucket, job.group, job.log_group) == ("b", "g", "/spot-trainer/cifar")
    assert job.dashboard_url == ("https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1"
                                 "#dashboards:name=spot-trainer-cifar")


@pytest.mark.parametrize("name", ["", "a/b", "-x", "my job", "Cifar", "x"])
def test_a_name_no_job_file_can_have_is_refused_before_any_call(name: str) -> None:
    # The job file's own rule (spot_trainer/aws_names.py), said in the line: no stack is ever looked up.
    with pytest.raises(JobProblem, match="is not a job name \\(2-32 lowercase letters"):
        find_job_stack(None, name, "eu-west-1")
