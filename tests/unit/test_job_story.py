"""A job's life drawn from its records: the steps, a bar per instance by market, a mark per interruption
and power-off, the work redone after a resume below the highest step reached, spend against the cap;
and the SVG holds each of them where a reader can find it."""

from __future__ import annotations

import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from spot_trainer.costs.instance_records import InstanceLife
from spot_trainer.costs.job_cost import InstanceCost
from spot_trainer.ops.job_plot import draw
from spot_trainer.ops.job_story import Redone, story_of
from spot_trainer.ops.problem import JobProblem

T0 = 1_800_000_000.0
EVENTS = [
    {"kind": "start", "epoch": T0 + 10, "instance": "i-a"},
    {"kind": "checkpoint", "epoch": T0 + 100, "step": 100, "published": True},
    {"kind": "checkpoint", "epoch": T0 + 150, "step": 150, "published": False},  # not in S3: no point
    {"kind": "interruption", "epoch": T0 + 200, "step": 180, "reason": "spot interruption notice"},
    {"kind": "resume", "epoch": T0 + 300, "step": 180},
    {"kind": "checkpoint", "epoch": T0 + 400, "step": 300, "published": True},
    {"kind": "resume", "epoch": T0 + 600, "step": 300},  # after i-b's power-off at step 340: 40 steps redone
    {"kind": "checkpoint", "epoch": T0 + 700, "step": 400, "published": True},
    {"kind": "done", "epoch": T0 + 720, "step": 400},
]
LIVES = [InstanceLife("i-a", "g5.xlarge", "us-east-1a", "spot", T0, T0 + 210, T0 + 210, 180),
         InstanceLife("i-b", "g5.xlarge", "us-east-1b", "spot", T0 + 250, T0 + 500, None, 340),
         InstanceLife("i-c", "g5.xlarge", "us-east-1a", "on-demand", T0 + 550, T0 + 730, T0 + 730, 400)]


def cost(life: InstanceLife, usd: float) -> InstanceCost:
    ended = "stopped" if life.stopped_at else "last seen"
    return InstanceCost(life.instance, life.instance_type, life.az, life.market, life.launched_at,
                        life.stopped_at or life.last_seen, ended, 0.1, usd, usd)


COSTS = [cost(LIVES[0], 0.1), cost(LIVES[1], 0.2), cost(LIVES[2], 0.3)]


def test_the_story_holds_every_instance_mark_and_redone_span() -> None:
    story = story_of("mine", EVENTS, LIVES, COSTS, {"budget_usd": 1.0})
    assert [(b.instance, b.market) for b in story.bars] == [("i-a", "spot"), ("i-b", "spot"), ("i-c", "on-demand")]
    assert [(m.kind, m.at - T0) for m in story.marks] == [("interruption", 200), ("power-off", 500)]
    assert story.redone == [Redone(T0 + 600, T0 + 700, 40)]  # back above step 340 at the step-400 checkpoint
    assert 150 not in [p.step for p in story.steps] and story.last_step == 400
    assert story.spend[-1][0] == T0 + 730 and abs(story.spend[-1][1] - 0.6) < 1e-9  # every instance's cost
    assert story.budget_usd == 1.0


def test_the_svg_names_each_bar_mark_and_the_last_step(tmp_path: Path) -> None:
    path = tmp_path / "life.svg"
    draw(story_of("mine", EVENTS, LIVES, COSTS, {"budget_usd": 1.0}), path)
    root = ElementTree.parse(path).getroot()
    ids = [element.get("id", "") for element in root.iter()]
    assert sorted(i for i in ids if i.startswith("instance-")) == ["instance-i-a", "instance-i-b", "instance-i-c"]
    assert [i for i in ids if i.startswith(("interruption-", "power-off-"))] == ["interruption-0", "power-off-i-b"]
    assert "redone-0" in ids and "spend" in ids and "budget" in ids
    texts = {element.get("id"): "".join(element.itertext()) for element in root.iter() if element.get("id")}
    assert "step 400" in texts["last-step"]


def test_no_cap_draws_no_spend_panel(tmp_path: Path) -> None:
    path = tmp_path / "life.svg"
    draw(story_of("mine", EVENTS, LIVES, COSTS, {}), path)
    ids = {element.get("id", "") for element in ElementTree.parse(path).getroot().iter()}
    assert "budget" not in ids and "instance-i-a" in ids


def test_without_matplotlib_the_plot_is_one_line_naming_the_install(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on a machine without it
    with pytest.raises(JobProblem, match=r"--plot needs matplotlib: pip install 'spot-trainer\[plot\]'"):
        draw(story_of("mine", EVENTS, LIVES, COSTS, {}), tmp_path / "life.svg")
    assert not (tmp_path / "life.svg").exists()
