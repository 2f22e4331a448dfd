"""Scripts that keep one checkpoint and rewrite it in place, unmodified, in the local spot cloud: nanoGPT's
`ckpt.pt` with `iter_num` inside, the ImageNet example's `checkpoint.pth.tar` beside its `model_best.pth.tar`
copy, and Keras' `ModelCheckpoint("model.keras")`. Through two power-offs and a notice each ends DONE, every
replacement resumes within one save interval and 3 s of work of where the lost instance was (by the script's
own word), and the report's lost steps are what the lost disks hold, or unknown where the file states no step."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from localcloud.cloud import LocalCloud
from localcloud.interruptions import ANNOUNCED, HARD, InterruptionPlan
from localcloud.report import build_report
from spot_trainer.storage.checkpoint_versions import is_version
from tests.e2e.conftest import Scenario, play_script
from tests.support.plain_jobs import where_it_was


@dataclass(frozen=True)
class Script:
    file: str
    arguments: str
    total: int  # iterations (or epochs) in all
    save_every: int
    step_seconds: float
    env: dict[str, str]
    resumed: str  # the script's own line when it resumes, its first group the iteration or epoch
    saved: str  # the file whose step the lost disk holds ('' where it states none)

    def three_seconds(self) -> int:
        return round(3 / self.step_seconds)


# Each script works 36 s in all, paced by its own sleeps (no machine makes it faster), and saves every 3 s. It
# prints no step: an interruption comes 5 s after the player sees an instance's first save up (a save goes up
# once still 2 s), so the first three instances work some 7 s each (22 s before the notice on 2 shared cores, a
# few more where uploads lag), and the last works the 14 s left to end DONE.
SCRIPT_RUNS = {
    "ckpt-pt": Script("fixed_ckpt.py", "360 30 $([ -f $CHECKPOINT_DIR/ckpt.pt ] && echo --resume)", 360, 30, 0.1,
                      {"STEP_SECONDS": "0.1"}, r"^resuming from iter (\d+)$", "ckpt.pt"),
    "imagenet-pair": Script("imagenet_style.py", "12 30 $([ -f $CHECKPOINT_DIR/checkpoint.pth.tar ] && echo --resume "
                            "$CHECKPOINT_DIR/checkpoint.pth.tar)", 12, 1, 3.0, {"STEP_SECONDS": "0.1"},
                            r"^=> loaded checkpoint '.*' \(epoch (\d+)\)$", "checkpoint.pth.tar"),
    "keras-model": Script("keras_fixed.py", "12", 12, 1, 3.0, {"EPOCH_SECONDS": "3.0"}, r"^resuming from epoch (\d+)$",
                          ""),
}
PLAN = InterruptionPlan(hard_kills=2, count=1, spacing_seconds=5, notice_seconds=8)


@pytest.fixture(scope="module", params=list(SCRIPT_RUNS))
def run(request: pytest.FixtureRequest, local_cloud: LocalCloud,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Script, Scenario]]:
    script = SCRIPT_RUNS[request.param]
    for scenario in play_script(local_cloud, tmp_path_factory.mktemp(request.param), script.file, script.arguments,
                                PLAN, script.env):
        yield script, scenario


def resumed_at(script: Script, journal: Path) -> int | None:
    """Where the script says it resumed, on one instance (None: it started fresh)."""
    found = [re.search(script.resumed, line) for line in journal.read_text().splitlines()]
    return next((int(match.group(1)) for match in found if match), None)


def held_step(script: Script, checkpoint_dir: Path | None) -> int | None:
    """The step the lost disk's checkpoint holds, as the script itself loads it (None: torn or absent)."""
    if not script.saved or checkpoint_dir is None or not (checkpoint_dir / script.saved).is_file():
        return None
    try:
        state = torch.load(checkpoint_dir / script.saved, map_location="cpu", weights_only=False)
    except Exception:  # torn by the power-off: the script could not resume from it either
        return None
    return int(state.get("iter_num", state.get("epoch")))


def test_it_ends_done_after_two_power_offs_and_a_notice(run: tuple[Script, Scenario]) -> None:
    script, scenario = run
    status = scenario.s3_json("status.json")
    assert status["state"] == "DONE", status
    if script.saved:
        assert status["checkpoint_step"] == script.total, status
    else:
        assert is_version(status["checkpoint_step"]), status
    assert sorted(r.kind for r in scenario.player.interruptions) == sorted([HARD, HARD, ANNOUNCED])


def test_each_replacement_resumes_within_one_save_interval_and_3_s_of_where_the_lost_instance_was(
        run: tuple[Script, Scenario]) -> None:
    script, scenario = run
    instances = list(scenario.player.instances.values())
    for record in scenario.player.interruptions:
        lost = scenario.player.instances[record.instance]
        replacement = instances[instances.index(lost) + 1]
        was, resumed = where_it_was(lost.root), resumed_at(script, replacement.journal)
        assert was is not None and resumed is not None, (record, replacement.journal.read_text()[-2000:])
        assert 0 <= was - resumed <= script.save_every + script.three_seconds(), (was, resumed, record)


def test_the_reports_lost_steps_are_what_the_lost_disks_hold(run: tuple[Script, Scenario]) -> None:
    script, scenario = run
    report = build_report(scenario.player, scenario.s3_json("status.json"))
    line = next(line for line in report.text().splitlines() if "completed steps lost" in line)
    if not script.saved:
        assert report.completed_steps_lost is None, line
        assert "unknown (the checkpoints state no step" in line, line
        return
    records = scenario.player.interruptions
    held = [held_step(script, scenario.player.instances[r.instance].checkpoint_dir) for r in records]
    expected = sum(max(0, step - (r.resumed_step or 0)) for step, r in zip(held, records, strict=True) if step)
    assert report.completed_steps_lost == expected, (held, [r.resumed_step for r in records], line)
    assert "lost 0" not in report.text()
