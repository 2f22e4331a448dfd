"""`status --plot` of a job that moved from its home region to another, from the records in both regions' buckets
in the local AWS (over HTTP): a row per region with where the job was placed, the steps trained there, each
instance there, the move with its reason, and the restore across regions with its bytes; the demo's picture
reads every region's bucket the same way."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import boto3
import pytest

from localcloud.cloud import Deployment, LocalCloud
from localcloud.life_picture import draw_life
from localcloud.moto_server import MotoServer
from spot_trainer.__main__ import main
from spot_trainer.costs.spot_prices import flat_trace
from tests.support.job_history import T0
from tests.support.region_history import AWAY, ENDS, HOME, MOVED_AT, REASON, RESTORED_AT, TwoRegions, write_two_regions


@pytest.fixture
def s3_in(aws_env: dict[str, str]) -> Callable[[str], Any]:
    return lambda region: boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name=region)


@pytest.fixture
def moved(s3_in: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch) -> TwoRegions:
    monkeypatch.setenv("AWS_REGION", HOME)
    return write_two_regions(s3_in, monkeypatch)


def elements(path: Path) -> dict[str, ElementTree.Element]:
    return {e.get("id", ""): e for e in ElementTree.parse(path).getroot().iter() if e.get("id")}


def text(element: ElementTree.Element) -> str:
    return " ".join("".join(element.itertext()).split())


def path_points(element: ElementTree.Element) -> list[tuple[float, float]]:
    d = " ".join(p.get("d", "") for p in element.iter() if p.tag.endswith("path"))
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", d)]
    return list(zip(numbers[0::2], numbers[1::2], strict=False))


def test_the_plot_draws_each_region_the_move_and_the_bytes_that_crossed(
        moved: TwoRegions, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "life.svg"
    code = main(["status", "--job", moved.job, "--bucket", moved.buckets[HOME], "--plot", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (f"plot: {path}: 2 instance(s), 1 interruption(s) (1 with a notice, 0 power-off(s)), up to step 200; "
            f"regions {HOME} → {AWAY} (1 move(s)), 48.0 MB restored across regions in 1 start(s)") in out
    drawn = elements(path)
    # Home trained from nothing to 120, then the job went away and trained on there from the step that crossed.
    assert text(drawn["stay-0-steps"]) == "steps 0→120 (120 trained)"
    assert text(drawn["stay-1-steps"]) == "steps 120→200 (80 trained)"
    assert text(drawn["move-0-reason"]) == f"move 1: {HOME} → {AWAY}: {REASON}"
    assert text(drawn["region-restore-0-text"]) == f"step 120 from {HOME}: 48.0 MB"

    # One time scale from the instances' own bars (a launch at T0 and one at T0+450) places the rest.
    left = {iid: min(x for x, _ in path_points(drawn[f"ran-{iid}"])) for iid in ENDS}
    per_second = (left["i-away"] - left["i-home"]) / 450

    def x(at: float) -> float:
        return left["i-home"] + (at - T0) * per_second

    for iid, end in ENDS.items():
        assert max(x for x, _ in path_points(drawn[f"ran-{iid}"])) == pytest.approx(x(end), abs=0.05), iid
    assert path_points(drawn["move-0"])[0][0] == pytest.approx(x(MOVED_AT), abs=0.05)
    (marker,) = [e for e in drawn["region-restore-0"].iter() if e.tag.endswith("use")]  # a marker is placed by x=
    assert float(marker.get("x", "nan")) == pytest.approx(x(RESTORED_AT), abs=0.05)
    # Where the job was placed: home until the move, away from it to the last record (i-away's stop).
    stays = [sorted(x for x, _ in path_points(drawn[f"stay-{n}"])) for n in (0, 1)]
    assert (stays[0][0], stays[0][-1]) == (pytest.approx(x(T0), abs=0.05), pytest.approx(x(MOVED_AT), abs=0.05))
    assert (stays[1][0], stays[1][-1]) == (pytest.approx(x(MOVED_AT), abs=0.05), pytest.approx(x(T0 + 700), abs=0.05))
    # Home's row on top (SVG's y grows downwards), each instance in its own region's row.
    home_y = [y for _, y in path_points(drawn["ran-i-home"])]
    away_y = [y for _, y in path_points(drawn["ran-i-away"])]
    assert max(home_y) < min(away_y)
    assert min(away_y) <= float(marker.get("y", "nan")) <= max(away_y), "restored in the region it ran in"


def test_a_job_of_one_region_draws_no_regions(moved: TwoRegions, s3_in: Callable[[str], Any], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    s3_in(HOME).delete_object(Bucket=moved.buckets[HOME], Key=f"{moved.job}/regions.json")
    path = tmp_path / "home.svg"
    assert main(["status", "--job", moved.job, "--bucket", moved.buckets[HOME], "--plot", str(path)]) == 0
    out = capsys.readouterr().out
    assert "up to step 120\n" in out and "regions" not in out.split("plot:")[1]
    assert not [i for i in elements(path) if i.startswith(("stay-", "move-", "ran-", "region-restore-"))]


def test_the_demo_picture_reads_every_region_and_the_status_where_the_job_last_ran(
        moved: TwoRegions, moto_server: MotoServer, tmp_path: Path) -> None:
    cloud = LocalCloud(tmp_path, moto=moto_server)  # the session's server: stopped by its own fixture
    away = Deployment(moved.job, f"SpotTrainer-{moved.job}-{AWAY}", moved.buckets[AWAY], "group", tmp_path, AWAY)
    home = Deployment(moved.job, f"SpotTrainer-{moved.job}", moved.buckets[HOME], "group", tmp_path, HOME,
                      others=(away,))
    line = draw_life(cloud, home, tmp_path / "demo.svg", flat_trace({"g5.xlarge": 0.36}, "flat"))
    assert line.endswith(f"up to step 200; regions {HOME} → {AWAY} (1 move(s)), 48.0 MB restored across regions "
                         "in 1 start(s)"), line
    assert text(elements(tmp_path / "demo.svg")["stay-1-steps"]) == "steps 120→200 (80 trained)"
