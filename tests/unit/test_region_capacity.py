"""The local cloud's per-region capacity plan: what --outage and --score accept, the scores that follow
an outage, and the board the player rewrites as step-placed outages meet the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcloud.interruptions import PlanError
from localcloud.region_capacity import Board, RegionPlan, Window, parse_region_outage, parse_region_score, read_board


def test_an_outage_names_its_region_then_spot_outages_start_and_length() -> None:
    planned = parse_region_outage("us-east-1:step30:900")
    assert (planned.region, planned.outage.after_step, planned.outage.length) == ("us-east-1", 30, 900.0)
    assert parse_region_outage("eu-west-1:40:90").outage.start == 40.0


@pytest.mark.parametrize("text", ["us-east-1", "us-east-1:40", ":40:90", "us-east-1:x:90"])
def test_a_wrong_outage_is_one_line_naming_the_form(text: str) -> None:
    with pytest.raises(PlanError, match=f"--outage '{text}'"):
        parse_region_outage(text)


@pytest.mark.parametrize("text", ["us-west-2", "us-west-2:0", "us-west-2:11", ":5"])
def test_a_score_is_1_to_10(text: str) -> None:
    with pytest.raises(PlanError, match="a score of 1 to 10"):
        parse_region_score(text)


def test_scores_fall_in_an_outage_recover_slowly_then_return_to_the_regions_own() -> None:
    board = Board((Window("us-east-1", 100, 200),), {"us-west-2": 4})
    assert [board.score("us-east-1", t) for t in (99, 100, 199, 200, 799, 800)] == [9, 1, 1, 5, 5, 9]
    assert board.score("us-west-2", 150) == 4 and board.score("eu-west-1", 150) == 9
    assert not board.has_capacity("us-east-1", 150) and board.has_capacity("us-west-2", 150)


def test_a_step_placed_outage_reaches_the_board_once_s3_holds_its_step(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    plan = RegionPlan([parse_region_outage("us-east-1:step30:900")], {"eu-west-1": 3}, path, started_at=1000.0)
    assert read_board(str(path)).windows == ()
    assert plan.advance(1100.0, 29) == []
    assert plan.advance(1160.0, 30) == ["us-east-1"]
    board = read_board(str(path))
    assert board.windows == (Window("us-east-1", 1160.0, 2060.0),) and board.scores == {"eu-west-1": 3}


def test_no_board_is_capacity_everywhere(tmp_path: Path) -> None:
    assert read_board(None).has_capacity("us-east-1", 0) and read_board(str(tmp_path / "none.json")).windows == ()
