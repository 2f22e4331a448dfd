"""Each listed region's spot price for the job: the move rule's last tie-break, read from EC2 and cached.

DescribeSpotPriceHistory with a StartTime answers every price change since, and the last one before it,
"which is the effective price as of the start time"
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html). So one call
per region, StartTime now, gives the price in effect for each of the job's types in each AZ: the newest
point per type and AZ. A region's price is the lowest of them. The group launches any of the job's types
in any of its AZs and its price-capacity-optimized strategy prefers the cheapest pools with capacity, and
the tie this breaks is between regions that AWS scores alike for capacity; it is a comparison between
regions, not a bill. Spot prices move slowly (hours between changes), so a region is asked once an hour.

A region whose price cannot be read has none (never 0): its ties go to the job file's order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

PRICE_POLL_SECONDS = 3600.0
PRODUCT = "Linux/UNIX"  # the instances' operating system, as spot_trainer/costs prices them


class PriceClient(Protocol):
    """An EC2 client (boto3's) of the region: the paginator of describe_spot_price_history."""

    def get_paginator(self, operation_name: str) -> Any: ...


class PriceUnreadable(RuntimeError):
    """The region's price could not be read; the message says why, on one line."""


def newest_prices(items: Iterable[Mapping[str, Any]], instance_types: Iterable[str]) -> dict[tuple[str, str], float]:
    """(type, AZ) → the newest SpotPrice among `items` (SpotPriceHistory entries) of the job's types."""
    wanted, newest = set(instance_types), dict[tuple[str, str], tuple[Any, float]]()
    for item in items:
        key, at = (str(item["InstanceType"]), str(item["AvailabilityZone"])), item["Timestamp"]
        if key[0] in wanted and (key not in newest or at > newest[key][0]):
            newest[key] = (at, float(item["SpotPrice"]))
    return {key: price for key, (_, price) in newest.items()}


def region_price(client: PriceClient, instance_types: tuple[str, ...], now: float) -> float:
    """The lowest current spot price of the job's types in the client's region, USD per instance-hour."""
    try:
        pages = client.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=list(instance_types), ProductDescriptions=[PRODUCT],
            StartTime=datetime.fromtimestamp(now, UTC))
        prices = newest_prices((item for page in pages for item in page.get("SpotPriceHistory", [])), instance_types)
    except Exception as error:  # no permission, no network, a malformed answer: botocore's many kinds
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PriceUnreadable(f"DescribeSpotPriceHistory failed: {first}") from error
    usable = [price for price in prices.values() if math.isfinite(price) and price > 0]
    if not usable:
        raise PriceUnreadable(f"EC2 lists no spot price of {', '.join(instance_types)}")
    return min(usable)


@dataclass
class PriceCache:
    """The regions' newest prices and when they were asked for; a region missing from `prices` has none."""

    instance_types: tuple[str, ...]
    asked_at: float | None = None
    prices: dict[str, float] = field(default_factory=dict)
    pace: float = 1.0  # the local spot cloud's time runs this many times faster than AWS's

    def current(self, clients: Callable[[str], PriceClient], regions: Iterable[str],
                now: float) -> tuple[dict[str, float], list[str]]:
        """The prices, asked for again once PRICE_POLL_SECONDS have passed; and one line per region whose
        price could not be read then."""
        unread: list[str] = []
        if self.asked_at is None or now - self.asked_at >= PRICE_POLL_SECONDS / self.pace:
            self.asked_at, self.prices = now, {}
            for region in regions:
                try:
                    self.prices[region] = region_price(clients(region), self.instance_types, now)
                except PriceUnreadable as error:
                    unread.append(f"spot price unknown in {region} ({error}): its ties go to the job file's order")
        return dict(self.prices), unread
