"""Clients in the user's region with the user's credentials, and AWS's own failures as one line each."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from ..storage.s3.s3client import client_config
from .problem import JobProblem

NO_CREDENTIALS = ("no AWS credentials found: run `aws configure`, or set AWS_PROFILE or "
                  "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
NO_REGION = "no AWS region: give --region or set AWS_REGION (the region the job was deployed to)"


def client(service: str, region: str | None) -> Any:
    """A client of `service`; the endpoint comes from AWS_ENDPOINT_URL when set, as boto3 reads it."""
    try:
        return boto3.session.Session().client(service, region_name=region, config=client_config(max_attempts=3))
    except NoRegionError as error:
        raise JobProblem(NO_REGION) from error


@contextlib.contextmanager
def aws_errors(what: str) -> Iterator[None]:
    """Credentials, region and service errors met while doing `what`, as one JobProblem line."""
    try:
        yield
    except NoCredentialsError as error:
        raise JobProblem(NO_CREDENTIALS) from error
    except NoRegionError as error:
        raise JobProblem(NO_REGION) from error
    except ClientError as error:
        info = error.response.get("Error", {})
        raise JobProblem(f"{what}: {info.get('Code', 'error')}: {info.get('Message', error)}", 1) from error
    except BotoCoreError as error:
        raise JobProblem(f"{what}: {error}", 1) from error
