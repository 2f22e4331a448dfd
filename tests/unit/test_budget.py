"""The spending cap's arithmetic: the spend from instance records, what the fleet costs per hour now,
when a check must stop the job to stay within the cap, and what finishing would cost (worked by hand)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from spot_trainer.agent.watches.budget_watch import BudgetWatch
from spot_trainer.costs.budget import cost_to_finish, job_spend, outlook, reached
from spot_trainer.costs.cost_text import describe_outlook
from spot_trainer.costs.instance_records import parse_record
from spot_trainer.costs.job_cost import job_cost
from spot_trainer.costs.spot_prices import TracePrices
from spot_trainer.storage.steps.remote import RemoteStore

T0 = 1_800_000_000.0
HOUR = 3600.0
TRACE = TracePrices.from_entries([
    {"type": "g5.xlarge", "az": "us-east-1a", "time": T0 - HOUR, "price": 0.30},
    {"type": "g5.xlarge", "az": "us-east-1a", "time": T0 + HOUR, "price": 0.50},  # the price now
], "hand-made trace")


def life(instance: str, market: str, launched: float, seen: float, stopped: float | None = None) -> Any:
    return parse_record({"instance": instance, "type": "g5.xlarge", "az": "us-east-1a", "market": market,
                         "launched_at": launched, "last_seen": seen, "stopped_at": stopped})


NOW = T0 + 2 * HOUR
# A: spot, T0 → T0+1h stopped: 1h × 0.30 = $0.30.  B: spot, running since T0+1h: 1h × 0.50 = $0.50, $0.50/h now.
# C: on demand, running since T0+1.5h: 0.5h × 1.006 = $0.503, $1.006/h now.
LIVES = [life("i-a", "spot", T0, T0 + HOUR, T0 + HOUR), life("i-b", "spot", T0 + HOUR, NOW - 30),
         life("i-c", "on-demand", T0 + 1.5 * HOUR, NOW - 30)]


def test_the_spend_is_the_ledgers_cost_and_the_rate_is_the_running_fleet_at_todays_prices() -> None:
    spend = job_spend(LIVES, TRACE, now=NOW)
    assert spend.usd == pytest.approx(0.30 + 0.50 + 0.503)
    assert spend.usd == pytest.approx(job_cost(LIVES, [], TRACE, now=NOW, job_running=True).cost_usd)
    assert spend.usd_per_hour == pytest.approx(0.50 + 1.006)
    assert spend.unpriced == ()


def test_a_check_stops_the_job_before_the_cap_by_what_the_fleet_costs_until_it_could_act_again() -> None:
    spend = job_spend(LIVES, TRACE, now=NOW)  # $1.303, $1.506/h: $0.0251 a minute
    assert not reached(spend, 1.35, lead_seconds=60)  # $1.328 by the next check
    assert reached(spend, 1.32, lead_seconds=60)
    assert reached(spend, 1.30, lead_seconds=0)  # already past it


def test_an_instance_without_a_price_is_named_not_guessed() -> None:
    lives = [*LIVES, parse_record({"instance": "i-x", "type": "x9.unknown", "az": "us-east-1a", "market": "spot",
                                   "launched_at": NOW - 600, "last_seen": NOW - 30, "stopped_at": None})]
    spend = job_spend(lives, TRACE, now=NOW)
    assert spend.usd == pytest.approx(1.303)
    assert any("i-x" in problem and "x9.unknown" in problem for problem in spend.unpriced), spend.unpriced


def test_the_cost_to_finish_is_the_steps_left_at_the_pace_and_the_hourly_rate() -> None:
    assert cost_to_finish(7200, 0.5, 1.2) == pytest.approx(1.2)  # one hour of steps at $1.2/h
    assert cost_to_finish(-5, 0.5, 1.2) == 0.0


def test_status_shows_the_cap_beside_the_spend_and_what_finishing_would_cost() -> None:
    cost = job_cost(LIVES, [], TRACE, now=NOW, job_running=True)
    status = {"budget_usd": 2.0, "total_steps": 10_000, "step": 2_800, "seconds_per_step": 0.5}
    ahead = outlook(status, cost, TRACE, now=NOW)
    # 7,200 steps at 0.5 s = 1 h at $1.506/h
    assert (ahead.remaining_steps, ahead.to_finish_usd) == (7200, pytest.approx(1.506))
    budget, finish = describe_outlook(ahead)
    assert budget == "budget         $1.30 spent of $2.00 (65%)"
    assert finish.startswith("to finish      $1.51 more for 7200 steps at 0.5 s/step and $1.51/h now, $2.81 in all;"
                             " over the budget by $0.8090"), finish


def test_without_a_pace_a_size_or_a_cap_status_says_what_is_missing() -> None:
    cost = job_cost(LIVES, [], TRACE, now=NOW, job_running=True)
    no_cap = describe_outlook(outlook({"step": 5, "total_steps": 10}, cost, TRACE, now=NOW))
    assert no_cap[0] == "budget         none set ([schedule] budget_usd; console: BudgetUSD)"
    assert "no pace measured" in no_cap[1]
    unsized = describe_outlook(outlook({"seconds_per_step": 1.0, "step": "bad"}, cost, TRACE, now=NOW))
    assert "the job's size is unknown" in unsized[1]
    done = describe_outlook(outlook({"seconds_per_step": 1.0, "step": 10, "total_steps": 10}, cost, TRACE, now=NOW))
    assert done[1] == "to finish      nothing: every step is done"


def test_a_job_stopped_at_its_cap_is_priced_to_finish_by_the_fleet_that_ran_last() -> None:
    stopped = [life("i-a", "spot", T0, T0 + HOUR, T0 + HOUR), life("i-b", "spot", T0 + HOUR, NOW, NOW)]
    cost = job_cost(stopped, [], TRACE, now=NOW + HOUR, job_running=False)
    ahead = outlook({"total_steps": 100, "step": 40, "seconds_per_step": 60.0}, cost, TRACE, now=NOW + HOUR)
    assert ahead.usd_per_hour == pytest.approx(0.50)  # i-b's type at today's price; i-a ended an hour before it
    assert ahead.to_finish_usd == pytest.approx(0.50)  # 60 steps × 60 s = 1 h


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteStore]:
    for name in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="capped")
        yield RemoteStore(s3, "capped", "job")


def test_the_watch_counts_the_spend_since_its_last_read_and_says_a_failed_read_once(store: RemoteStore) -> None:
    store.put_json("instances/i-b.json", {"instance": "i-b", "type": "g5.xlarge", "az": "us-east-1a",
                                           "market": "spot", "launched_at": NOW - HOUR, "last_seen": NOW - 30,
                                           "stopped_at": None})
    clock, said = [NOW], []
    watch = BudgetWatch(0.60, store, TRACE, stop_seconds=60, warn=said.append, check_seconds=60,
                        clock=lambda: clock[0])
    assert watch.reason_to_stop() is None  # nothing read yet: no stop on a guess
    watch.read()  # $0.50 after an hour at $0.50/h; two minutes ahead: $0.5167
    assert watch.reason_to_stop() is None
    clock[0] += 11 * 60  # not read again, but eleven minutes more at $0.50/h: $0.6083 two minutes ahead
    assert "reaches its budget $0.6000" in (watch.reason_to_stop() or ""), watch.said
    store.s3.delete_object(Bucket="capped", Key="job/instances/i-b.json")
    store.s3.delete_bucket(Bucket="capped")
    watch.read()
    watch.read()
    watch.reason_to_stop()
    watch.reason_to_stop()
    assert len(said) == 1 and said[0].startswith("the budget could not be checked: "), said
