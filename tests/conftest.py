"""Fixtures shared by every test layer. Layer-specific fixtures live beside their tests."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from localcloud.moto_server import MotoServer

REPO_ROOT = Path(__file__).resolve().parent.parent
# One torch thread in every process the tests start (the local instances' commands take it too):
# three test workers share two cores, and a second OpenMP thread of a tiny model only spins on a busy
# core, for the same numbers at several times the CPU. Set before any test imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# A suite started in the background by a non-interactive shell (`make test &`) inherits SIGINT ignored (POSIX),
# and every process it starts would too: Python then never raises KeyboardInterrupt, so the Ctrl-C the tests
# give as a user would (`logs --follow`, `localcloud up`) would go unheard. A user's terminal leaves it as is.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The longest modules, longest first (seconds each took under `make test` on two cores, 2026-11-26).
# `make test` keeps collection order (--no-loadscope-reorder), so the workers take these first and the
# run ends on short modules instead of one worker on a long one while the others idle.
LONGEST_MODULES = {
    "tests/integration/test_multinode.py": 202,
    "tests/e2e/test_deadline_fallback.py": 190,
    "tests/integration/test_multinode_frameworks.py": 155,
    "tests/e2e/test_interrupted_training.py": 130,
    "tests/integration/test_agent_plain_scripts.py": 118,
    "tests/e2e/test_own_folder_job.py": 107,
    "tests/e2e/test_walkthrough.py": 60,
    "tests/integration/test_exact_resume.py": 76,
    "tests/integration/test_agent_frameworks.py": 62,
    "tests/integration/test_multinode_hf.py": 70,
    "tests/integration/test_multinode_own_script.py": 56,
    "tests/integration/test_agent_interruption.py": 42,
    "tests/integration/test_ddp_resume.py": 42,
    "tests/integration/test_framework_writer_kills.py": 42,
    "tests/integration/test_agent_torchrun_grace.py": 42,
    "tests/unit/test_stack.py": 42,
    "tests/integration/test_agent_own_folder.py": 41,
    "tests/integration/test_framework_world.py": 40,
    "tests/integration/test_agent_kill.py": 37,
    "tests/e2e/test_crash_loop.py": 32,
    "tests/integration/test_agent_notifications.py": 29,
    "tests/integration/test_preflight.py": 25,
    "tests/integration/test_stack_deploy.py": 24,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first, the rest in their own order (a stable sort)."""
    items.sort(key=lambda item: -LONGEST_MODULES.get(item.nodeid.split("::")[0], 0))


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
