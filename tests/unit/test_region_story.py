"""What a picture of a job of several regions says where the records leave something unknown: a stay whose start
no record gives, a restore across regions whose bytes were not counted, a region whose bucket no record names, a
move before any instance ran. Each is written as unknown, never filled in."""

from __future__ import annotations

import warnings
from pathlib import Path
from xml.etree import ElementTree

from spot_trainer.costs.instance_records import InstanceLife
from spot_trainer.ops.job_plot import draw
from spot_trainer.ops.job_story import JobStory, bars_of, step_points
from spot_trainer.ops.region_story import RegionRecords, regions_story

T0 = 1_790_000_000.0
HOME, SECOND, THIRD = "us-east-1", "us-west-2", "eu-west-1"


def life(iid: str, az: str, start: float, end: float, step: int) -> InstanceLife:
    return InstanceLife(iid, "g5.xlarge", az, "spot", start, end, end, step=step)


def texts(path: Path) -> dict[str, str]:
    return {e.get("id", ""): " ".join("".join(e.itertext()).split())
            for e in ElementTree.parse(path).getroot().iter() if e.get("id")}


def test_what_no_record_says_is_drawn_as_unknown(tmp_path: Path) -> None:
    moved = {"kind": "region", "epoch": T0 + 60, "from": HOME, "to": SECOND, "reason": "no spot capacity"}
    back = {"kind": "region", "epoch": T0 + 900, "from": SECOND, "to": HOME, "reason": "capacity is back"}
    # us-west-2's instance trained to 300 but its start left no resume (an older agent): where it began is unknown.
    second = RegionRecords([{"kind": "checkpoint", "epoch": T0 + 500, "step": 300, "published": True}],
                           [life("i-2", f"{SECOND}a", T0 + 120, T0 + 600, 300)])
    home = RegionRecords([moved, back, {"kind": "checkpoint", "epoch": T0 + 30, "step": 50, "published": True},
                          {"kind": "region_restore", "epoch": T0 + 960, "step": 300, "region": SECOND},
                          {"kind": "resume", "epoch": T0 + 961, "step": 300}],
                         [life("i-1", f"{HOME}a", T0, T0 + 50, 50), life("i-3", f"{HOME}b", T0 + 950, T0 + 1000, 340)])
    regions = regions_story((HOME, SECOND, THIRD), {HOME: home, SECOND: second})
    assert [(s.region, s.from_step, s.to_step) for s in regions.stays] == [
        (HOME, 0, 50), (SECOND, None, 300), (HOME, 300, 340)]
    lives = [*home.lives, *second.lives]
    events = [*home.events, *second.events]
    story = JobStory("far", step_points(events, lives), bars_of(lives, events), [], [], [], None)
    path = tmp_path / "far.svg"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing from matplotlib on the user's terminal
        draw(story, path, regions)
    drawn = texts(path)
    assert drawn["stay-1-steps"] == "steps ?→300 (where it began is unknown)"
    assert drawn["stay-2-steps"] == "steps 300→340 (40 trained)"
    assert drawn["region-restore-0-text"] == f"step 300 from {SECOND}: bytes unknown"
    assert drawn["move-1-reason"] == f"move 2: {SECOND} → {HOME}: capacity is back"
    whole = " ".join(drawn.values())
    assert f"{THIRD} (bucket unknown)" in whole and "minutes since the first instance" in whole


def test_a_move_before_any_instance_starts_the_time_axis(tmp_path: Path) -> None:
    moved = {"kind": "region", "epoch": T0, "from": HOME, "to": SECOND, "reason": "no spot capacity"}
    second = RegionRecords([], [life("i-2", f"{SECOND}a", T0 + 300, T0 + 400, 20)])
    regions = regions_story((HOME, SECOND), {HOME: RegionRecords([moved], []), SECOND: second})
    assert [(s.region, s.from_step, s.to_step) for s in regions.stays] == [(SECOND, 0, 20)]
    story = JobStory("late", step_points([], second.lives), bars_of(second.lives, []), [], [], [], None)
    draw(story, tmp_path / "late.svg", regions)
    assert "minutes since the first record" in " ".join(texts(tmp_path / "late.svg").values())
