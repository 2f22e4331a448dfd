"""A job's cost from a hand-made record: three instances, a spot price that steps up mid-lifetime,
a power-off without notice, an on-demand instance, and the steps redone after the interruptions.

The answer, worked out by hand (g5.xlarge on demand: $1.006/h):
  A spot us-east-1a, T0 → T0+2h, $0.30/h then $0.50/h from T0+1h:  1h × 0.30 + 1h × 0.50 = $0.80
  B spot us-east-1b, T0+2h1m → last seen T0+3h1m (no stop), $0.40/h:          1h × 0.40 = $0.40
  C on demand,       T0+3h2m → T0+4h32m:                                   1.5h × 1.006 = $1.509
  cost $2.709; the same 4.5 h on demand $4.527; saved $1.818 (40.2%)
  steps: A 0 → 1000, B 1000 → 1700 (its record's last step), C 1500 → 2600:
  computed 1000 + 700 + 1100 = 2800, distinct 2600, redone 200, at $2.709 / 2800 per step = $0.1935
"""

from __future__ import annotations

from typing import Any

import pytest

from spot_trainer.costs.cost_text import describe_cost
from spot_trainer.costs.instance_records import InstanceLife, RecordError, billed_span, parse_record
from spot_trainer.costs.job_cost import job_cost
from spot_trainer.costs.spot_prices import NoPrices, TracePrices

T0 = 1_800_000_000.0
HOUR = 3600.0

TRACE = TracePrices.from_entries([
    {"type": "g5.xlarge", "az": "us-east-1a", "time": T0 - 1000, "price": 0.30},
    {"type": "g5.xlarge", "az": "us-east-1a", "time": T0 + HOUR, "price": "0.50"},
    {"type": "g5.xlarge", "az": "us-east-1a", "time": T0 + 5 * HOUR, "price": 9.99},  # after every instance
    {"type": "g5.xlarge", "az": "us-east-1b", "time": "2027-01-15T08:00:00Z", "price": 0.40},  # = T0, ISO
], "hand-made trace")


def record(instance: str, market: str, az: str, launched: float, seen: float, stopped: float | None,
           **extra: Any) -> dict[str, Any]:
    return {"instance": instance, "type": "g5.xlarge", "az": az, "market": market, "launched_at": launched,
            "last_seen": seen, "stopped_at": stopped, **extra}


RECORDS = [
    record("i-a", "spot", "us-east-1a", T0, T0 + 2 * HOUR, T0 + 2 * HOUR),
    record("i-b", "spot", "us-east-1b", T0 + 2 * HOUR + 60, T0 + 3 * HOUR + 60, None, step=1700),
    record("i-c", "on-demand", "us-east-1a", T0 + 3 * HOUR + 120, T0 + 4.5 * HOUR + 120, T0 + 4.5 * HOUR + 120),
]


def event(kind: str, instance: str, at: float, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "instance": instance, "epoch": at, **fields}


EVENTS = [
    event("start", "i-a", T0 + 100, attempt=1),
    event("checkpoint", "i-a", T0 + HOUR, step=500),
    event("interruption", "i-a", T0 + 2 * HOUR - 100, step=1000, reason="spot interruption notice"),
    event("start", "i-b", T0 + 2 * HOUR + 200, attempt=2),
    event("resume", "i-b", T0 + 2 * HOUR + 210, step=1000),
    event("checkpoint", "i-b", T0 + 2.5 * HOUR, step=1500),
    event("start", "i-c", T0 + 3 * HOUR + 200, attempt=3),
    event("resume", "i-c", T0 + 3 * HOUR + 210, step=1500),
    event("done", "i-c", T0 + 4.5 * HOUR + 100, step=2600),
]


def lives() -> list[InstanceLife]:
    return [parse_record(r) for r in RECORDS]


def test_the_job_costs_what_the_hand_worked_answer_says() -> None:
    cost = job_cost(lives(), EVENTS, TRACE, now=T0 + 10 * HOUR, job_running=False)
    a, b, c = cost.instances
    assert (round(a.cost_usd or 0, 2), round(b.cost_usd or 0, 2), round(c.cost_usd or 0, 3)) == (0.80, 0.40, 1.509)
    assert b.ended_by == "last seen" and b.hours == pytest.approx(1.0)
    assert cost.instance_hours == pytest.approx(4.5)
    assert (cost.spot_hours, cost.on_demand_hours) == pytest.approx((3.0, 1.5))
    assert round(cost.spot_cost_usd, 2) == 1.20 and round(cost.on_demand_instances_usd, 3) == 1.509
    assert round(cost.cost_usd, 3) == 2.709
    assert round(cost.on_demand_same_hours_usd, 3) == 4.527
    assert round(cost.savings_usd, 3) == 1.818 and round(cost.savings_fraction or 0, 4) == 0.4016
    assert (cost.steps_computed, cost.redone_steps) == (2800, 200)
    assert round(cost.redone_cost_usd or 0, 4) == 0.1935
    assert cost.problems == [] and cost.unpriced == []


def test_a_running_job_counts_a_live_instance_to_now_and_a_silent_one_to_its_last_beat() -> None:
    live = parse_record(record("i-live", "spot", "us-east-1a", T0, T0 + HOUR - 30, None, heartbeat_seconds=60))
    assert billed_span(live, now=T0 + HOUR, job_running=True).end == T0 + HOUR
    assert billed_span(live, now=T0 + HOUR + 200, job_running=True).ended_by == "last seen"  # 3 beats missed
    assert billed_span(live, now=T0 + HOUR, job_running=False).end == T0 + HOUR - 30


def test_ec2_bills_at_least_a_minute_unless_told_otherwise() -> None:
    short = parse_record(record("i-s", "spot", "us-east-1a", T0, T0 + 20, T0 + 20))
    assert billed_span(short, now=T0 + 99, job_running=False).end == T0 + 60
    assert billed_span(short, now=T0 + 99, job_running=False, minimum_seconds=0).end == T0 + 20


def test_an_unknown_price_is_named_and_left_out_never_guessed() -> None:
    odd = parse_record({**RECORDS[0], "instance": "i-odd", "type": "g6e.48xlarge"})
    cost = job_cost([*lives(), odd], EVENTS, TRACE, now=T0 + 10 * HOUR, job_running=False)
    assert cost.unpriced == ["i-odd"] and round(cost.cost_usd, 3) == 2.709
    assert any("no on-demand price for g6e.48xlarge" in p for p in cost.problems)
    assert any("no spot price for g6e.48xlarge in us-east-1a" in p for p in cost.problems)


def test_an_unreadable_price_history_is_one_line_and_the_rest_is_still_priced() -> None:
    cost = job_cost(lives(), EVENTS, NoPrices("cannot read the EC2 spot price history: no credentials"),
                    now=T0 + 10 * HOUR, job_running=False)
    assert cost.problems == ["cannot read the EC2 spot price history: no credentials"]
    assert cost.unpriced == ["i-a", "i-b"] and round(cost.cost_usd, 3) == 1.509  # the on-demand instance
    assert cost.savings_fraction == 0.0 and cost.redone_steps == 200
    text = "\n".join(describe_cost(cost))
    assert "2 of 3 instances not priced" in text and "note           cannot read the EC2" in text


def test_the_status_section_names_every_figure() -> None:
    text = "\n".join(describe_cost(job_cost(lives(), EVENTS, TRACE, now=T0 + 10 * HOUR, job_running=False)))
    assert "instance-hours 4.50 on 3 instances (3.00 spot, 1.50 on-demand)" in text
    assert "cost           $2.71 (spot $1.20, on-demand instances $1.51)" in text
    assert "on-demand      $4.53 for the same hours at on-demand prices" in text
    assert "savings        $1.82 (40.2%) against the same hours on demand" in text
    # i-b lost power: what it ran after its last heartbeat is not seen, so the count is a floor.
    assert "redone work    at least 200 of 2800 steps computed were computed again: $0.1935, their share" in text
    assert "prices         spot: hand-made trace; on-demand table of " in text


@pytest.mark.parametrize(("change", "message"), [
    ({"market": "reserved"}, "market: expected 'spot' or 'on-demand'"),
    ({"launched_at": "yesterday"}, "launched_at: expected epoch seconds"),
    ({"type": ""}, "type: expected a non-empty string"),
    ({"stopped_at": float("nan")}, "stopped_at: expected epoch seconds"),
])
def test_a_record_no_agent_writes_is_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(RecordError, match=message):
        parse_record({**RECORDS[0], **change})
