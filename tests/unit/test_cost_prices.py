"""Spot price sources (EC2's history, a trace file) and the integral of a piecewise-constant price."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from spot_trainer.costs.on_demand_prices import AS_OF, SOURCE, USD_PER_HOUR, on_demand_price
from spot_trainer.costs.price_integral import cost_over, covers
from spot_trainer.costs.price_pools import PooledPrices
from spot_trainer.costs.spot_prices import Ec2SpotPrices, PriceError, PricePoint, TracePrices
from stacks.job.instance_types import ON_DEMAND_USD_PER_HOUR

T0 = 1_800_000_000.0


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


class PagedEc2:
    """EC2's DescribeSpotPriceHistory as pages, answering what the request asked and more (another AZ)."""

    def __init__(self, pages: list[list[dict[str, Any]]]) -> None:
        self.pages, self.requests = pages, list[dict[str, Any]]()

    def get_paginator(self, name: str) -> Any:
        assert name == "describe_spot_price_history"
        source = self

        class Paginator:
            def paginate(self, **request: Any) -> Any:
                source.requests.append(request)
                return ({"SpotPriceHistory": page} for page in source.pages)

        return Paginator()


def item(az: str, seconds: float, price: str) -> dict[str, Any]:
    return {"AvailabilityZone": az, "InstanceType": "g5.xlarge", "ProductDescription": "Linux/UNIX",
            "SpotPrice": price, "Timestamp": at(seconds)}


def test_ec2_history_reads_every_page_of_its_own_az_from_the_price_in_effect_at_start() -> None:
    ec2 = PagedEc2([[item("us-east-1a", 600, "0.50"), item("us-east-1b", 0, "0.10")],
                    [item("us-east-1a", -7200, "0.25"), item("us-east-1a", -3600, "0.30")]])
    points = Ec2SpotPrices(ec2).history("g5.xlarge", "us-east-1a", T0, T0 + 3600)
    assert points == [PricePoint(T0 - 3600, 0.30), PricePoint(T0 + 600, 0.50)]
    [request] = ec2.requests
    assert request["ProductDescriptions"] == ["Linux/UNIX"] and request["AvailabilityZone"] == "us-east-1a"
    assert (request["StartTime"], request["EndTime"], request["InstanceTypes"]) == (at(0), at(3600), ["g5.xlarge"])


def test_an_unreadable_history_is_a_price_error_of_one_line() -> None:
    class Broken(PagedEc2):
        def get_paginator(self, name: str) -> Any:
            class Paginator:
                def paginate(self, **request: Any) -> Any:
                    raise RuntimeError("Unable to locate credentials\nmore detail")
                    yield

            return Paginator()

    with pytest.raises(PriceError, match=r"^cannot read the EC2 spot price history: Unable to locate credentials$"):
        Ec2SpotPrices(Broken([])).history("g5.xlarge", "us-east-1a", T0, T0 + 1)


def test_moto_answers_a_flat_price_from_2006() -> None:
    with mock_aws():
        points = Ec2SpotPrices(boto3.client("ec2", region_name="us-east-1")).history(
            "g5.xlarge", "us-east-1a", T0, T0 + 3600)
    assert [(datetime.fromtimestamp(p.time, UTC).year, p.price) for p in points] == [(2006, 0.00001)]


def test_a_trace_file_takes_iso_times_and_epochs_and_a_star_for_every_az(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps([
        {"type": "g5.xlarge", "az": "*", "time": "2027-01-15T08:00:00Z", "price": 0.3},
        {"type": "g5.xlarge", "az": "*", "time": T0 + 60, "price": 0.6},
        {"type": "g5.xlarge", "az": "us-east-1c", "time": 0, "price": 0.1},
    ]))
    prices = TracePrices.from_file(trace)
    points = prices.history("g5.xlarge", "us-east-1a", T0 + 30, T0 + 90)
    assert points == [PricePoint(T0, 0.3), PricePoint(T0 + 60, 0.6)]
    assert prices.history("g5.xlarge", "us-east-1c", T0, T0 + 90) == [PricePoint(0, 0.1)]
    assert prices.history("g6.xlarge", "us-east-1a", T0, T0 + 90) == []
    assert str(trace) in prices.description


@pytest.mark.parametrize(("entries", "message"), [
    ({"type": "g5.xlarge"}, "expected a JSON list"),
    ([{"type": "g5.xlarge", "az": "*", "time": 0}], "entry 1: price None is not a number"),
    ([{"type": "g5.xlarge", "az": "*", "time": 0, "price": -1}], "entry 1: price -1 is not a price"),
    ([{"type": "g5.xlarge", "az": "*", "time": "noon", "price": 1}], "entry 1: time 'noon' is neither"),
    ([{"az": "*", "time": 0, "price": 1}], "entry 1: expected"),
])
def test_a_malformed_trace_is_one_line_naming_the_entry(entries: Any, message: str) -> None:
    with pytest.raises(PriceError, match=message):
        TracePrices.from_entries(entries, "trace t.json")


def test_unreadable_trace_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PriceError, match="No such file"):
        TracePrices.from_file(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("[{")
    with pytest.raises(PriceError, match="bad.json"):
        TracePrices.from_file(tmp_path / "bad.json")


def test_the_integral_holds_each_price_until_the_next_change() -> None:
    points = [PricePoint(T0 - 100, 0.36), PricePoint(T0 + 1800, 0.72)]
    assert cost_over(points, T0, T0 + 3600) == pytest.approx(0.5 * 0.36 + 0.5 * 0.72)
    assert cost_over(points, T0 + 1800, T0 + 1800) == 0.0
    late = [PricePoint(T0 + 1800, 0.72)]  # a history that begins late: its first price fills the gap
    assert cost_over(late, T0, T0 + 3600) == pytest.approx(0.72) and not covers(late, T0) and covers(points, T0)


def test_the_on_demand_table_knows_every_type_the_stack_prices_and_says_where_from() -> None:
    assert {name: USD_PER_HOUR[name] for name in ON_DEMAND_USD_PER_HOUR} == ON_DEMAND_USD_PER_HOUR
    assert on_demand_price("g5.xlarge") == 1.006 and on_demand_price("x9.enormous") is None
    assert SOURCE.startswith("https://aws.amazon.com/ec2/pricing/on-demand/") and datetime.fromisoformat(AS_OF)


class Counting:
    description = "counting"

    def __init__(self, fail: bool = False) -> None:
        self.asked: list[tuple[str, str, float, float]] = []
        self.fail = fail

    def history(self, instance_type: str, az: str, start: float, end: float) -> list[PricePoint]:
        self.asked.append((instance_type, az, start, end))
        if self.fail:
            raise PriceError("cannot read the EC2 spot price history: throttled")
        return [PricePoint(start - 1, 0.3), PricePoint(start + 100, 0.4)]


def test_each_pool_is_asked_once_over_every_instance_in_it_and_a_failure_is_not_repeated() -> None:
    source = Counting()
    pooled = PooledPrices(source, [(("g5.xlarge", "a"), T0 + 50, T0 + 60), (("g5.xlarge", "a"), T0, T0 + 10),
                                   (("g5.xlarge", "b"), T0, T0 + 5)])
    assert pooled.history("g5.xlarge", "a", T0 + 50, T0 + 60) == [PricePoint(T0 - 1, 0.3)]
    assert pooled.history("g5.xlarge", "a", T0, T0 + 10) == [PricePoint(T0 - 1, 0.3)]
    pooled.history("g5.xlarge", "b", T0, T0 + 5)
    assert source.asked == [("g5.xlarge", "a", T0, T0 + 60), ("g5.xlarge", "b", T0, T0 + 5)]
    failing = Counting(fail=True)
    pooled = PooledPrices(failing, [(("g5.xlarge", "a"), T0, T0 + 1), (("g6.xlarge", "a"), T0, T0 + 1)])
    for kind in ("g5.xlarge", "g6.xlarge"):
        with pytest.raises(PriceError, match="throttled"):
            pooled.history(kind, "a", T0, T0 + 1)
    assert len(failing.asked) == 1
