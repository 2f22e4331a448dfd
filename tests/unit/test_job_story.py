"""A job's life drawn from its records as the agents and the user's commands write them: a bar per instance
ending where the instance ended, a mark per lost instance at the moment it was lost, the pause and the resume
once each (never the pause's stop as an interruption), the work redone after a resume below the highest step
reached, and spend on a scale that reads. The SVG holds each of them where a reader can find it, and drawing
says nothing on the terminal."""

from __future__ import annotations

import re
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import pytest

from spot_trainer.costs.instance_records import read_records
from spot_trainer.costs.job_cost import stored_job_cost
from spot_trainer.costs.spot_prices import flat_trace
from spot_trainer.ops.job_plot import draw
from spot_trainer.ops.job_story import JobStory, Redone, story_of
from spot_trainer.ops.plot_command import plot_job
from spot_trainer.ops.problem import JobProblem
from spot_trainer.storage.steps.remote import RemoteStore
from tests.support.job_history import ENDS, PAUSED_AT, POWER_OFF_AT, RESUMED_AT, T0, written_job

PRICES = flat_trace({"g5.xlarge": 0.36}, "flat")  # spot and on-demand alike: every instance priced


@pytest.fixture
def job(monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteStore]:
    with written_job("life", monkeypatch) as store:
        yield store


def story(store: RemoteStore) -> JobStory:
    status = store.read_record("status.json") or {}
    events = store.events()
    lives, _ = read_records(store)
    cost = stored_job_cost(store, events, status.get("state"), PRICES, now=time.time())
    return story_of(store.job, events, lives, cost.instances, status, cost.losses)


def test_the_story_holds_each_loss_once_the_pause_once_and_each_instance_to_its_end(job: RemoteStore) -> None:
    told = story(job)
    assert [(m.kind, m.at - T0, m.instance) for m in told.marks] == [
        ("interruption", 200, "i-a"), ("power-off", POWER_OFF_AT - T0, "i-b"),
        ("paused", PAUSED_AT - T0, ""), ("resumed", RESUMED_AT - T0, "")]
    assert {b.instance: b.end for b in told.bars} == ENDS
    assert [(b.instance, b.market) for b in told.bars] == [("i-a", "spot"), ("i-b", "spot"), ("i-c", "on-demand"),
                                                           ("i-d", "spot")]
    # i-b reached step 340 (its record) before the power-off; i-c resumed from 300 and passed 340 at step 400.
    assert told.redone == [Redone(T0 + 570, T0 + 650, 40)]
    assert told.last_step == 500 and told.budget_usd == 40.0 and told.spent > 0


def path_xs(element: ElementTree.Element) -> list[float]:
    """The x coordinates of the path(s) inside one drawn element."""
    d = " ".join(p.get("d", "") for p in element.iter() if p.tag.endswith("path"))
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", d)]
    return numbers[0::2]


def test_the_svg_draws_pause_resume_and_losses_once_each_where_they_happened(job: RemoteStore,
                                                                             tmp_path: Path) -> None:
    path = tmp_path / "life.svg"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing from matplotlib on the user's terminal
        line = plot_job(job, PRICES, path)
    assert "4 instance(s), 2 interruption(s) (1 with a notice, 1 power-off(s)), up to step 500" in line
    elements = {e.get("id"): e for e in ElementTree.parse(path).getroot().iter() if e.get("id")}
    marks = sorted(i for i in elements if i.startswith(("interruption-", "power-off-", "paused-", "resumed-")))
    assert marks == ["interruption-i-a", "paused-0", "power-off-i-b", "resumed-0"], "i-c's stop is the pause's"

    # Minutes run left to right at one scale: two bars' starts (launches at T0 and T0+810) give it.
    left = {i: min(path_xs(elements[f"instance-{i}"])) for i in ENDS}
    per_second = (left["i-d"] - left["i-a"]) / 810

    def x(at: float) -> float:
        return left["i-a"] + (at - T0) * per_second

    for instance, end in ENDS.items():
        assert max(path_xs(elements[f"instance-{instance}"])) == pytest.approx(x(end), abs=0.05), instance
    assert path_xs(elements["power-off-i-b"])[0] == pytest.approx(x(POWER_OFF_AT), abs=0.05)
    assert path_xs(elements["paused-0"])[0] == pytest.approx(x(PAUSED_AT), abs=0.05)
    assert path_xs(elements["resumed-0"])[0] == pytest.approx(x(RESUMED_AT), abs=0.05)
    # $0.09 spent under a $40 cap: the spend has its own scale, the cap is written, not a line far above.
    assert "spend" in elements and "budget $40: 0.2% of it spent" in "".join(elements["budget"].itertext())


def test_a_cap_within_reach_is_a_line_and_a_spend_of_nothing_is_no_panel(job: RemoteStore, tmp_path: Path) -> None:
    told = story(job)
    near = tmp_path / "near.svg"
    draw(replace(told, budget_usd=0.1), near)
    budget = next(e for e in ElementTree.parse(near).getroot().iter() if e.get("id") == "budget")
    assert len(path_xs(budget)) == 2, "a horizontal line across the panel"
    nothing = tmp_path / "nothing.svg"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        draw(replace(told, spend=[(T0, 0.0), (T0 + 900, 0.0)]), nothing)
    root = ElementTree.parse(nothing).getroot()
    ids = {e.get("id") for e in root.iter()}
    assert "spend" not in ids and "budget" not in ids
    assert "(budget $40; no spend measured yet)" in "".join(root.itertext())


def test_a_job_with_no_step_and_no_label_draws_without_a_warning(tmp_path: Path) -> None:
    empty = JobStory(job="new", steps=[], bars=[], marks=[], redone=[], spend=[], budget_usd=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        draw(empty, tmp_path / "new.svg")
    assert "job new" in "".join(ElementTree.parse(tmp_path / "new.svg").getroot().itertext())


def test_without_matplotlib_the_plot_is_one_line_naming_the_install(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on a machine without it
    empty = JobStory(job="new", steps=[], bars=[], marks=[], redone=[], spend=[], budget_usd=None)
    with pytest.raises(JobProblem, match=r"--plot needs matplotlib: pip install 'spot-trainer\[plot\]'"):
        draw(empty, tmp_path / "life.svg")
    assert not (tmp_path / "life.svg").exists()
