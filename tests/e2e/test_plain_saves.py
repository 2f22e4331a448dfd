"""Scripts as people write them, unmodified, through two power-offs in the local spot cloud: a tiny CNN that
`torch.save`s `checkpoint_<step>.pt` every 20 steps straight under that name, a reentrant `model_<epoch>.pth`
series and a Keras `model_<epoch>.keras` per epoch. None renames, none prints a step. Each save goes up once its
format proves it whole, so every replacement resumes within one save interval plus 3 s of work of where the
killed instance was, and the report's lost steps are what the lost disks and resumes show, never a bare 0."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from localcloud.cloud import LocalCloud
from localcloud.interruptions import HARD, InterruptionPlan
from localcloud.report import build_report
from tests.e2e.conftest import Scenario, play_script
from tests.support.plain_jobs import where_it_was


@dataclass(frozen=True)
class Script:
    file: str
    arguments: str
    total: int  # steps (or epochs) in all
    save_every: int
    step_seconds: float
    env: dict[str, str]
    announces: str  # the agent's line for its saves' rule

    def three_seconds(self) -> int:
        return round(3 / self.step_seconds)


SCRIPT_RUNS = {
    "torch-save-checkpoint-n": Script("cnn_checkpoint_n.py", "200 20", 200, 20, 0.1, {"STEP_SECONDS": "0.1"},
                                      ": a torch archive, uploaded once whole and still 2 s"),
    "model-per-epoch-series": Script("model_per_epoch.py", "24", 24, 1, 1.0, {"EPOCH_SECONDS": "1.0"},
                                     ": a torch archive, uploaded once whole and still 2 s"),
    "keras-per-epoch": Script("keras_per_epoch.py", "24", 24, 1, 1.0, {"EPOCH_SECONDS": "1.0"},
                              ": a Keras archive, uploaded once whole and still 2 s"),
}
PLAN = InterruptionPlan(hard_kills=2, spacing_seconds=7)


@pytest.fixture(scope="module", params=list(SCRIPT_RUNS))
def run(request: pytest.FixtureRequest, local_cloud: LocalCloud,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Script, Scenario]]:
    script = SCRIPT_RUNS[request.param]
    for scenario in play_script(local_cloud, tmp_path_factory.mktemp(request.param), script.file, script.arguments,
                                PLAN, script.env):
        yield script, scenario


def loads(path: Path) -> bool:
    """Whether a save on a lost disk reads back whole, by the library that wrote it, not by the agent's rule."""
    try:
        if path.suffix == ".keras":
            with zipfile.ZipFile(path) as archive:
                return archive.testzip() is None
        torch.load(path, weights_only=False)
        return True
    except Exception:
        return False


def newest_loadable(scenario: Scenario, instance: str) -> int | None:
    folder = scenario.player.instances[instance].checkpoint_dir
    saves = {int(re.findall(r"\d+", p.name)[-1]): p for p in folder.iterdir() if p.suffix in (".pt", ".pth", ".keras")
             and not p.name.startswith(".")} if folder and folder.is_dir() else {}
    return max((step for step, path in saves.items() if loads(path)), default=None)


def test_it_ends_done_after_two_power_offs(run: tuple[Script, Scenario]) -> None:
    script, scenario = run
    status = scenario.s3_json("status.json")
    assert (status["state"], status["checkpoint_step"]) == ("DONE", script.total), status
    assert [r.kind for r in scenario.player.interruptions] == [HARD, HARD]


def test_each_replacement_resumes_within_one_save_interval_and_3_s_of_where_the_lost_instance_was(
        run: tuple[Script, Scenario]) -> None:
    script, scenario = run
    for record in scenario.player.interruptions:
        was = where_it_was(scenario.player.instances[record.instance].root)
        assert was is not None and record.resumed_step is not None, record
        assert was - record.resumed_step <= script.save_every + script.three_seconds(), (was, record)


def test_the_agent_says_once_which_rule_sends_its_saves_up(run: tuple[Script, Scenario]) -> None:
    script, scenario = run
    for instance in scenario.player.instances.values():
        said = [line for line in instance.journal.read_text().splitlines() if script.announces in line]
        assert len(said) <= 1, said
    assert any(script.announces in i.journal.read_text() for i in scenario.player.instances.values())


def test_the_reports_lost_steps_are_what_the_lost_disks_and_resumes_show(run: tuple[Script, Scenario]) -> None:
    _, scenario = run
    report = build_report(scenario.player, scenario.s3_json("status.json"))
    records = scenario.player.interruptions
    held = [newest_loadable(scenario, r.instance) for r in records]
    if any(step is None for step in held):
        assert report.completed_steps_lost is None and "unknown (the script prints no step)" in report.text()
        return
    expected = sum(max(0, step - (r.resumed_step or 0)) for step, r in zip(held, records, strict=True) if step)
    assert report.completed_steps_lost == expected
    line = next(line for line in report.text().splitlines() if "completed steps lost" in line)
    assert re.search(rf"at least {expected} \(the script prints no step: the newest checkpoint", line), line
