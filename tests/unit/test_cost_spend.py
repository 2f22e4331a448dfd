"""The per-heartbeat spend behind the SpendUSD metric: at the instance's market price, spot looked up hourly."""

from __future__ import annotations

import pytest

from spot_trainer.costs.spend_meter import SpendMeter
from spot_trainer.costs.spot_prices import NoPrices, PriceError, PricePoint, TracePrices
from tests.support.clock import ManualClock

T0 = 1_800_000_000.0


class CountingTrace(TracePrices):
    def __init__(self) -> None:
        super().__init__({("g5.xlarge", "us-east-1a"): [PricePoint(T0 - 60, 0.36), PricePoint(T0 + 1800, 0.72)]},
                         "trace")
        self.questions = 0

    def history(self, instance_type: str, az: str, start: float, end: float) -> list[PricePoint]:
        self.questions += 1
        return super().history(instance_type, az, start, end)


def test_spot_spend_uses_the_price_now_and_asks_at_most_hourly() -> None:
    clock, prices = ManualClock(T0), CountingTrace()
    meter = SpendMeter("g5.xlarge", "us-east-1a", "spot", prices, clock=clock)
    assert meter.spend(T0 - 60, T0) == pytest.approx(60 / 3600 * 0.36)
    clock.advance(3599)  # the price changed at T0+1800, but the hour is not up
    assert meter.spend(T0, T0 + 60) == pytest.approx(60 / 3600 * 0.36) and prices.questions == 1
    clock.advance(1)
    assert meter.spend(T0, T0 + 60) == pytest.approx(60 / 3600 * 0.72) and prices.questions == 2


def test_on_demand_spend_is_at_the_table_price_and_unknown_types_are_unknown() -> None:
    assert SpendMeter("g5.xlarge", "us-east-1a", "on-demand", NoPrices("unused")).spend(0, 3600) == 1.006
    assert SpendMeter("x9.enormous", "us-east-1a", "on-demand", None).spend(0, 3600) is None


def test_a_failed_lookup_is_not_retried_before_the_hour_is_up() -> None:
    clock = ManualClock(T0)
    meter = SpendMeter("g5.xlarge", "us-east-1a", "spot", NoPrices("no credentials"), clock=clock)
    with pytest.raises(PriceError, match="no credentials"):
        meter.spend(T0, T0 + 60)
    assert meter.spend(T0, T0 + 60) is None  # unknown, not guessed, and EC2 is not asked again
    clock.advance(3600)
    with pytest.raises(PriceError, match="no credentials"):
        meter.spend(T0, T0 + 60)
