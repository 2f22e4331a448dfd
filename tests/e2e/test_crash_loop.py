"""A training command that always fails: the agent spends its restart budget, records FAILED with the
command's own last words, and scales the group to 0 so no instance keeps burning money."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import InterruptionPlan
from tests.e2e.conftest import Scenario, play

COMMAND = "echo 'CUDA out of memory (pretend)' >&2; exit 3"


@pytest.fixture(scope="module")
def crashed(local_cloud: LocalCloud, example_app: Path) -> Iterator[Scenario]:
    yield from play(local_cloud, example_app, InterruptionPlan(), {"TrainingCommand": COMMAND},
                    total_steps=None)


def test_crash_loop_ends_failed_with_reason_and_no_capacity(crashed: Scenario) -> None:
    status = crashed.s3_json("status.json")
    assert status["state"] == "FAILED"
    assert "exited with code 3" in status["reason"] and "CUDA out of memory (pretend)" in status["reason"]
    assert status["failures"] == 3  # the example job's restart budget
    failures = [e for e in crashed.events() if e["kind"] == "failure"]
    assert [e["failures"] for e in failures] == [1, 2, 3]
    group = crashed.group()
    assert group["DesiredCapacity"] == 0 and group["Instances"] == []
    assert len(crashed.player.instances) == 1  # failing is not an interruption: nothing was replaced
    assert all(instance.processes() == [] for instance in crashed.player.instances.values())
    (instance,) = crashed.player.instances.values()
    assert "completed lifecycle action spot-trainer-drain" in instance.journal.read_text()
