"""The deadline-aware market policy: the forms it reads, its decisions, and the P8 simulation."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from benchmarks.p8_deadline import Settings, always_spot, jobs, simulate, spot_then_on_demand, uniform_progress
from spot_trainer.capacity.policy import (
    ON_DEMAND,
    SPOT,
    DeadlinePlan,
    Decision,
    Progress,
    choose_market,
    format_duration,
    parse_deadline,
    parse_duration,
    spot_wait_exceeded,
)

HOUR = 3600.0
# 1000 steps, the line 10 h long (deadline 10h30m after the first start, 30m margin): 100 steps an hour.
PLAN = DeadlinePlan.checked(first_start=1000.0, deadline_at=1000.0 + 10.5 * HOUR, total_steps=1000,
                            margin_seconds=0.5 * HOUR)


def at(hours: float, step: int, seconds_per_step: float | None = 18.0) -> Progress:
    return Progress(PLAN.first_start + hours * HOUR, step, seconds_per_step)


@pytest.mark.parametrize(("text", "seconds"), [
    ("36h", 36 * HOUR), ("90m", 5400.0), ("2d", 48 * HOUR), ("1d12h", 36 * HOUR), ("45s", 45.0),
    ("0h30m", 1800.0), (" 2h ", 2 * HOUR),
])
def test_durations_are_whole_numbers_with_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0h", "0d0s", "-1h", "1.5h", "36", "36x", "h", "36H", "1 h"])
def test_malformed_durations_are_refused_on_one_line_naming_them(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_duration(text)
    assert repr(text) in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_deadline_is_a_utc_timestamp_or_a_duration_from_the_first_start() -> None:
    expected = datetime(2026, 12, 1, 18, 0, tzinfo=UTC).timestamp()
    assert parse_deadline("2026-12-01T18:00:00Z", first_start=5.0) == expected
    assert parse_deadline("2026-12-01T18:00Z", first_start=5.0) == expected
    assert parse_deadline("1d12h", first_start=5.0) == 5.0 + 36 * HOUR


@pytest.mark.parametrize("text", ["2026-12-01T18:00:00", "2026-12-01T18:00:00+01:00", "2026-13-01T18:00:00Z",
                                  "2026-04-31T18:00:00Z", "20261201T180000Z", "tomorrow", "", "0h"])
def test_malformed_deadlines_are_refused_on_one_line_naming_them(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_deadline(text, first_start=0.0)
    assert repr(text) in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("seconds", "text"), [(30, "30s"), (90, "1m30s"), (3600, "1h"), (5400, "1h30m"),
                                               (93600, "1d2h")])
def test_durations_print_in_the_form_they_are_read(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("deadline_at", "total_steps", "named"), [
    (1000.0 + 0.5 * HOUR, 100, "deadline"), (500.0, 100, "deadline"), (1000.0 + 10 * HOUR, 0, "total steps"),
])
def test_a_plan_with_no_room_names_what_is_wrong(deadline_at: float, total_steps: int, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        DeadlinePlan.checked(1000.0, deadline_at, total_steps, 0.5 * HOUR)


def test_without_spot_capacity_behind_the_line_goes_on_demand_and_says_by_how_much() -> None:
    decision = choose_market(PLAN, at(5, 400), SPOT, running=False)
    assert decision == Decision(ON_DEMAND, "no spot capacity and behind the straight line to the deadline by 100 steps")


def test_spot_that_runs_is_kept_behind_the_line_while_the_pace_makes_it() -> None:
    # An hour behind, but 600 steps at 18 s end 2h before deadline − margin: as fast as on-demand.
    assert choose_market(PLAN, at(5, 400), SPOT).market == SPOT


def test_a_restart_in_progress_is_not_falling_behind() -> None:
    # 20 steps (12 minutes) behind, well within the 30m margin: a boot and restore, not a trend.
    assert choose_market(PLAN, at(5, 480), SPOT).market == SPOT


def test_ahead_of_the_line_stays_on_spot() -> None:
    decision = choose_market(PLAN, at(5, 700), SPOT)
    assert decision == Decision(SPOT, "ahead of the straight line to the deadline by 2h")


def test_on_demand_is_left_once_within_a_margin_of_the_line() -> None:
    assert choose_market(PLAN, at(5, 400), ON_DEMAND).market == ON_DEMAND  # an hour behind: not yet
    assert choose_market(PLAN, at(5, 480), ON_DEMAND) == Decision(SPOT, "within 12m of the line, back to spot")
    assert choose_market(PLAN, at(5, 600), ON_DEMAND) == Decision(SPOT, "ahead by 1h, back to spot")


def test_on_demand_is_kept_while_the_measured_pace_leaves_little_to_spare() -> None:
    # An hour ahead of the line, but 400 steps at 42 s end only 20 minutes before deadline − margin.
    decision = choose_market(PLAN, at(5, 600, seconds_per_step=42.0), ON_DEMAND)
    assert decision.market == ON_DEMAND
    assert "20m to spare" in decision.reason


def test_the_safety_net_overrides_a_lead_on_the_line() -> None:
    # Ahead of the line by 2h, but 300 steps at 120 s take 10h with 5h left: on-demand now.
    decision = choose_market(PLAN, at(5, 700, seconds_per_step=120.0), SPOT)
    assert decision.market == ON_DEMAND
    assert decision.reason.startswith("the remaining 300 steps need 10h")


def test_before_the_pace_is_known_only_the_line_counts() -> None:
    assert choose_market(PLAN, at(0, 0, seconds_per_step=None), SPOT).market == SPOT
    assert choose_market(PLAN, at(5, 700, seconds_per_step=None), SPOT).market == SPOT


def test_a_finished_job_keeps_its_market() -> None:
    assert choose_market(PLAN, at(9, 1000), ON_DEMAND).market == ON_DEMAND


@pytest.mark.parametrize("start", [SPOT, ON_DEMAND])
def test_a_job_wobbling_around_the_line_keeps_its_market(start: str) -> None:
    market, switches = start, 0
    for minute in range(120, 480):
        hours = minute / 60
        step = round(100 * hours + 10 * math.sin(minute / 7))  # ±6 minutes around the line
        decision = choose_market(PLAN, at(hours, step), market)
        switches += decision.market != market
        market = decision.market
    assert market == SPOT and switches == (start == ON_DEMAND)  # on-demand is left once, then never again


def test_the_spot_wait_rule() -> None:
    assert spot_wait_exceeded(HOUR, HOUR)
    assert not spot_wait_exceeded(HOUR - 1, HOUR)
    assert not spot_wait_exceeded(100 * HOUR, None)


def test_uniform_progress_keeps_every_deadline_where_always_spot_does_not() -> None:
    settings = Settings()
    batch = jobs(12, seed=3, unavailability=0.3, settings=settings)
    spot = [simulate(job, always_spot, settings) for job in batch]
    fallback = [simulate(job, spot_then_on_demand(settings), settings) for job in batch]
    uniform = [simulate(job, uniform_progress(settings), settings) for job in batch]
    assert all(outcome.met for outcome in uniform)
    assert not all(outcome.met for outcome in spot)
    # Cheaper than falling back for good, dearer than never paying for on-demand, below on-demand itself.
    mean = sum(outcome.relative_cost for outcome in uniform) / len(uniform)
    assert sum(o.relative_cost for o in spot) / len(spot) < mean < sum(o.relative_cost for o in fallback) / len(batch)
    assert mean < 1.0
