"""A replacement trains sooner than the first instance: the demo job with a setup that installs a typical
requirements set (real wheels from a local folder, as pip would fetch them from an index) is interrupted
once. The first instance installs and stores its environment in the job's bucket; the replacement
restores it instead, and the report shows each instance's launch → first step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import InterruptionPlan
from localcloud.report import build_report
from localcloud.wheels import typical_requirements
from spot_trainer.agent.boot_times import boot_rows
from tests.e2e.conftest import Scenario, play


@pytest.fixture(scope="module")
def scenario(local_cloud: LocalCloud, example_app: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Scenario]:
    wheels = tmp_path_factory.mktemp("package-index")
    setup = "pip install -q " + " ".join(typical_requirements(wheels))
    # The package index: pip's own variables reach user data (and the command) through the instance's env.
    yield from play(local_cloud, example_app, InterruptionPlan(count=1, notice_seconds=6), {"SetupCommand": setup},
                    total_steps=40, command_env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)})


def test_the_first_instance_builds_and_the_replacement_restores_and_trains_sooner(scenario: Scenario) -> None:
    assert scenario.s3_json("status.json")["state"] == "DONE"
    rows = boot_rows(scenario.events())
    assert [row["environment"] for row in rows] == ["built", "restored"], rows
    built, restored = rows
    assert built["environment_bytes"] > 80_000_000  # the requirements' payload, packed
    assert restored["environment_bytes"] == built["environment_bytes"]
    assert restored["environment_s"] < built["environment_s"], rows
    assert restored["first_step_s"] < built["first_step_s"], rows
    report = build_report(scenario.player, scenario.s3_json("status.json")).text()
    assert "environment restored in" in report and "launch → first step   first instance" in report, report
    print(report)
