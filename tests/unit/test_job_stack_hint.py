"""An unknown job: "did you mean" from the `SpotTrainer-*` stacks that exist, and the plain advice when
they cannot be listed (ListStacks is not a permission the job commands need)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from spot_trainer.ops.job_stack import find_job_stack
from spot_trainer.ops.problem import JobProblem

MISSING = ClientError({"Error": {"Code": "ValidationError",
                                 "Message": "Stack with id SpotTrainer-cnnn does not exist"}}, "DescribeStacks")


class Pages:
    def __init__(self, pages: list[dict[str, Any]] | Exception) -> None:
        self.pages = pages

    def paginate(self, **_: Any) -> list[dict[str, Any]]:
        if isinstance(self.pages, Exception):
            raise self.pages
        return self.pages


class CloudFormation:
    def __init__(self, pages: list[dict[str, Any]] | Exception) -> None:
        self.pages = pages

    def describe_stacks(self, **_: Any) -> dict[str, Any]:
        raise MISSING

    def get_paginator(self, name: str) -> Pages:
        assert name == "list_stacks"
        return Pages(self.pages)


def answer(pages: list[dict[str, Any]] | Exception) -> str:
    with pytest.raises(JobProblem) as caught:
        find_job_stack(CloudFormation(pages), "cnnn", "us-east-1")
    return str(caught.value)


def stacks(*names: str) -> list[dict[str, Any]]:
    return [{"StackSummaries": [{"StackName": name, "StackStatus": "CREATE_COMPLETE"} for name in names]}]


def test_a_name_close_to_a_deployed_job_is_asked_about() -> None:
    assert answer(stacks("SpotTrainer-cnn", "SpotTrainer-cifar", "cnnn-other-app")).startswith(
        "no stack SpotTrainer-cnnn in us-east-1: did you mean --job cnn? Else deploy it with")


@pytest.mark.parametrize("pages", [stacks("SpotTrainer-llama", "cnn"), ClientError(
    {"Error": {"Code": "AccessDenied", "Message": "not allowed"}}, "ListStacks")], ids=["none close", "denied"])
def test_without_a_close_name_the_advice_is_to_deploy(pages: list[dict[str, Any]] | Exception) -> None:
    assert answer(pages) == ("no stack SpotTrainer-cnnn in us-east-1: deploy it with `npx cdk deploy -c job=cnnn`, "
                             "or give --bucket for a job whose stack is gone")
