"""One instance's spend as it goes: its cost between two heartbeats, at its market's price.

Feeds the SpendUSD metric (a running sum on the dashboard). The spot price is looked up at most once
an hour (spot prices change a few times a day at most); a failed lookup is not retried before then
either, and the spend of those beats is unknown rather than guessed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .on_demand_prices import on_demand_price
from .spot_prices import PriceError, SpotPriceSource

REFRESH_SECONDS = 3600.0


class SpendMeter:
    def __init__(self, instance_type: str, az: str, market: str, prices: SpotPriceSource | None, *,
                 clock: Callable[[], float] = time.time, refresh_seconds: float = REFRESH_SECONDS) -> None:
        self.instance_type, self.az, self.market, self.prices = instance_type, az, market, prices
        self.clock, self.refresh_seconds = clock, refresh_seconds
        self._price: float | None = None
        self._looked_up_at: float | None = None

    def price(self) -> float | None:
        """USD per hour now; raises PriceError when a due spot lookup fails."""
        if self.market != "spot" or self.prices is None:
            return on_demand_price(self.instance_type)
        now = self.clock()
        if self._looked_up_at is None or now - self._looked_up_at >= self.refresh_seconds:
            self._looked_up_at = now
            self._price = None
            points = self.prices.history(self.instance_type, self.az, now, now)
            if not points:
                raise PriceError(f"no spot price for {self.instance_type} in {self.az}")
            self._price = points[-1].price
        return self._price

    def spend(self, since: float, until: float) -> float | None:
        """USD for [since, until] at the current price; None when the price is unknown."""
        price = self.price()
        return None if price is None else max(0.0, until - since) / 3600 * price
