"""Fixtures shared by every test layer. Layer-specific fixtures live beside their tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from localcloud.moto_server import MotoServer

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """One moto server for the session; tests isolate themselves by unique bucket/stack names."""
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with MotoServer(log_path=log) as server:
        yield server


@pytest.fixture
def aws_env(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point boto3 in this process (and children that inherit os.environ) at moto."""
    env = moto_server.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return env


@pytest.fixture
def s3(aws_env: dict[str, str]) -> boto3.client:
    return boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")


@pytest.fixture
def bucket(s3: boto3.client, request: pytest.FixtureRequest) -> str:
    """A fresh bucket per test, named after the test so failures are easy to trace."""
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50]
    name = name.strip("-") + "-" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=name)
    return name
