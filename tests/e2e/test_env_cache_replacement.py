"""A replacement restores the environment the first instance built: the demo job, with a setup that
installs a typical requirements set (real wheels from a local folder, as pip would fetch them from an
index), is interrupted once. The first instance installs and stores its environment in the job's bucket; the replacement
restores it instead, and the report shows each instance's launch → first step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import InterruptionPlan
from localcloud.report import build_report
from localcloud.wheels import typical_requirements
from spot_trainer.agent.records.boot_times import boot_rows
from tests.e2e.conftest import Scenario, play

STEPS = 20  # the demo's model, shorter: what this scenario times is each instance's boot
TRAIN_ARGS = (f"--model resnet --synthetic --steps {STEPS} --batch-size 16 --width 8 --checkpoint-every-steps 5 "
              "--log-every 1 --min-step-seconds 0.3")


@pytest.fixture(scope="module")
def scenario(local_cloud: LocalCloud, example_app: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Scenario]:
    wheels = tmp_path_factory.mktemp("package-index")
    setup = "pip install -q " + " ".join(typical_requirements(wheels))
    # The package index: pip's own variables reach user data (and the command) through the instance's env.
    yield from play(local_cloud, example_app, InterruptionPlan(count=1, notice_seconds=6),
                    {"SetupCommand": setup, "TrainArguments": TRAIN_ARGS}, total_steps=STEPS,
                    command_env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)})


def test_the_first_instance_builds_and_the_replacement_restores_instead_of_installing(scenario: Scenario) -> None:
    assert scenario.s3_json("status.json")["state"] == "DONE"
    rows = boot_rows(scenario.events())
    assert [row["environment"] for row in rows] == ["built", "restored"], rows
    assert rows[1]["environment_bytes"] > 80_000_000  # the requirements' payload, packed by the first
    first, replacement = (scenario.player.instances[row["instance"]].root / "var/log/spot-trainer/bootstrap.log"
                          for row in rows)
    assert "[setup-command]: running in" in first.read_text()
    assert "[setup-command]: running in" not in replacement.read_text()  # its setup's packages came restored
    assert all(isinstance(row["first_step_s"], float) for row in rows), rows
    # Both figures, and their ratio, are in the report (printed: the run's measure, not a bound).
    report = build_report(scenario.player, scenario.s3_json("status.json")).text()
    assert "environment restored in" in report and "launch → first step   first instance" in report, report
    print(report)
