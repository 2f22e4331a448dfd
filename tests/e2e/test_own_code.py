"""The HF Trainer and Lightning example jobs (their own code shipped as an asset, the setup step run
on each instance) deployed with the real CDK CLI to moto and trained on local spot instances that
are powered off once without notice and interrupted once with notice. Unmodified, a script redoes
at most one save interval per interruption; with its one-line callback, a notice costs no step.
The report's figures are checked against what the scripts themselves printed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import ANNOUNCED, HARD, InterruptionPlan
from localcloud.report import build_report
from tests.e2e.conftest import Scenario, play

# Enough steps that each instance trains past the 5 s before its interruption and the last has work
# left, from about 80 steps/s for the tiny GPT-2 and 450 for the Lightning MLP on a slow core to 190 and
# 1,000 on a fast one (where 2,000 and 12,000 steps let the second instance finish before its notice).
STEPS_AND_SAVES = {"hf": (5000, 200), "lightning": (30000, 1000)}
PLAN = InterruptionPlan(count=1, hard_kills=1, notice_seconds=6, spacing_seconds=5)  # power-off, then notice
PREFIX = {"hf": "HF", "lightning": "PL"}
# HF through both interruptions in the local spot cloud, shipped code, its setup step and the callback
# the agent gives it, is tests/e2e/test_own_folder_job.py; Lightning's notice with its callback under
# the agent is tests/integration/test_agent_frameworks.py. The runs here are kept for `-m slow`.
RUNS = [pytest.param(("hf", "on"), id="hf-callback", marks=pytest.mark.slow),
        pytest.param(("lightning", "on"), id="lightning-callback", marks=pytest.mark.slow),
        pytest.param(("hf", "off"), id="hf-unmodified", marks=pytest.mark.slow),
        pytest.param(("lightning", "off"), id="lightning-unmodified", marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=RUNS)
def run(request: pytest.FixtureRequest, local_cloud: LocalCloud) -> Iterator[tuple[str, str, Scenario]]:
    framework, callback = request.param
    prefix, (steps, save_every) = PREFIX[framework], STEPS_AND_SAVES[framework]
    env = {f"{prefix}_STEPS": str(steps), f"{prefix}_SAVE_STEPS": str(save_every), f"{prefix}_CALLBACK": callback,
           "OMP_NUM_THREADS": "1"}
    if callback == "off":  # unmodified, and not given the callback by the agent either
        env["SPOT_AUTO_RESUME"] = "off"
    app = local_cloud.synth(str(Path("jobs") / f"{framework}.toml"))  # a path, as a user may give it
    for scenario in play(local_cloud, app, PLAN, {}, total_steps=None, command_env=env):
        yield framework, callback, scenario


def printed(scenario: Scenario, instance: str) -> list[dict]:
    """The progress lines the script printed on one instance, read from its journal here, not by the player."""
    lines = scenario.player.instances[instance].journal.read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith('{"event"')]


def reached(scenario: Scenario, instance: str) -> int:
    """The highest step an instance's script said it completed (step lines come at most every 0.2 s;
    saves and emergency saves always print theirs)."""
    return max(e["step"] for e in printed(scenario, instance) if isinstance(e.get("step"), int))


def test_the_job_ends_done_at_its_last_step_after_both_interruptions(run: tuple[str, str, Scenario]) -> None:
    framework, _, scenario = run
    steps = STEPS_AND_SAVES[framework][0]
    status = scenario.s3_json("status.json")
    assert (status["state"], status["checkpoint_step"], status["warning"]) == ("DONE", steps, ""), status
    assert [r.kind for r in scenario.player.interruptions] == [HARD, ANNOUNCED]
    finisher = [i for i in scenario.player.instances.values() if "training finished" in i.journal.read_text()]
    assert len(finisher) == 1 and f"finished at global step {steps}" in finisher[0].journal.read_text()


def test_each_instance_unpacked_the_shipped_code_and_ran_the_setup_step(run: tuple[str, str, Scenario]) -> None:
    _, _, scenario = run
    for instance in scenario.player.instances.values():
        log = (instance.root / "var/log/spot-trainer/bootstrap.log").read_text()
        assert "[job-code]: job code from s3://cdk-" in log and "[setup-command]: COMPLETED" in log, log[-1500:]


def test_what_each_interruption_costs(run: tuple[str, str, Scenario]) -> None:
    framework, callback, scenario = run
    save_every = STEPS_AND_SAVES[framework][1]
    hard, notice = scenario.player.interruptions
    assert hard.resumed_step is not None and hard.resumed_step % save_every == 0  # its last regular save
    if callback == "on":
        [emergency] = [e for e in printed(scenario, notice.instance) if e["event"] == "emergency_checkpoint"]
        assert emergency["step"] == reached(scenario, notice.instance) == notice.resumed_step  # no step lost
        # A power-off loses what had not reached S3: the steps since the last save, plus that save
        # when its upload was still in flight (a kill right after a save).
        assert hard.resumed_step == hard.uploaded_step, "everything that reached S3 is resumed from"
        assert 0 <= reached(scenario, hard.instance) - hard.resumed_step < 2 * save_every
    else:
        # Unmodified: no emergency save; the replacement resumes from the last regular save.
        assert notice.resumed_step is not None and notice.resumed_step % save_every == 0
        assert not [e for e in printed(scenario, notice.instance) if e["event"] == "emergency_checkpoint"]


def test_the_report_matches_what_the_scripts_printed(run: tuple[str, str, Scenario]) -> None:
    framework, callback, scenario = run
    steps = STEPS_AND_SAVES[framework][0]
    report = build_report(scenario.player, scenario.s3_json("status.json"))
    assert (report.state, report.steps, report.interruptions, report.hard_kills) == ("DONE", steps, 2, 1)
    assert "never came" not in report.text()  # both planned interruptions came
    if callback == "on":
        lost = 0
        for record in scenario.player.interruptions:
            lost += reached(scenario, record.instance) - (record.resumed_step or 0)
        assert report.progress_from == "steps"
        assert report.completed_steps_lost == lost and report.steps_computed == steps + lost
    else:
        assert report.progress_from == "checkpoints"
        assert "counted from checkpoints" in report.text()
