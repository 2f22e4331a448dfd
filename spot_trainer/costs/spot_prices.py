"""Where spot prices come from: EC2's price history, or a trace file for the local cloud and benchmarks.

A source answers, for one instance type in one AZ, the price changes over a window: the newest change
at or before its start (the price in effect then) and every change up to its end. Spot prices are
per AZ, so an instance is priced by its own AZ's history. moto answers a flat 0.00001 dated 2006 for
every type: locally, only a trace gives meaningful figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

PRODUCT = "Linux/UNIX"


class PriceError(RuntimeError):
    """The price history could not be read; the message says why, on one line."""


@dataclass(frozen=True)
class PricePoint:
    time: float  # epoch seconds: the price holds from here until the next point
    price: float  # USD per hour


class SpotPriceSource(Protocol):
    description: str  # where the prices come from, for the report

    def history(self, instance_type: str, az: str, start: float, end: float) -> list[PricePoint]:
        """Price changes in time order: the one in effect at `start`, then every one up to `end`."""
        ...


def in_window(points: Iterable[PricePoint], start: float, end: float) -> list[PricePoint]:
    """The newest point at or before `start` and the points after it up to `end`, in time order."""
    ordered = sorted(points, key=lambda point: point.time)
    before = [point for point in ordered if point.time <= start]
    return before[-1:] + [point for point in ordered if start < point.time <= end]


class Ec2SpotPrices:
    """EC2 DescribeSpotPriceHistory, paginated. EC2 also returns the last change before StartTime,
    which is the price in effect at the start; history goes back 90 days."""

    description = "EC2 spot price history (DescribeSpotPriceHistory, Linux/UNIX)"

    def __init__(self, ec2: Any) -> None:
        self.ec2 = ec2

    def history(self, instance_type: str, az: str, start: float, end: float) -> list[PricePoint]:
        pages = self.ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=[instance_type], ProductDescriptions=[PRODUCT], AvailabilityZone=az,
            StartTime=datetime.fromtimestamp(start, UTC), EndTime=datetime.fromtimestamp(max(start, end), UTC))
        try:
            # Filtered here too: moto ignores the AZ filter.
            points = [PricePoint(item["Timestamp"].timestamp(), float(item["SpotPrice"]))
                      for page in pages for item in page.get("SpotPriceHistory", [])
                      if item.get("AvailabilityZone") == az and item.get("InstanceType") == instance_type]
        except Exception as error:  # no credentials, no permission, no network: botocore's many kinds
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise PriceError(f"cannot read the EC2 spot price history: {first}") from error
        return in_window(points, start, end)


class NoPrices:
    """A source that could not be set up (no region, no credentials): every question gets its reason."""

    description = "unavailable (see the note)"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def history(self, instance_type: str, az: str, start: float, end: float) -> list[PricePoint]:
        raise PriceError(self.reason)


class RegionalPrices:
    """A job of several regions: each instance's prices from its own region's source (its AZ less the letter)."""

    def __init__(self, by_region: dict[str, SpotPriceSource], fallback: SpotPriceSource) -> None:
        self.by_region, self.fallback = by_region, fallback
        self.description = fallback.description

    def history(self, instance_type: str, az: str, start: float, end: float) -> list[PricePoint]:
        source = self.by_region.get(az.rstrip("abcdefghijklmnopqrstuvwxyz"), self.fallback)
        return source.history(instance_type, az, start, end)


class TracePrices:
    """Prices from a list of {"type", "az", "time" (ISO-8601 or epoch), "price"}; "az": "*" matches
    every AZ (a flat trace for a local run)."""

    def __init__(self, points: Mapping[tuple[str, str], Sequence[PricePoint]], description: str) -> None:
        self.points, self.description = points, description

    @classmethod
    def from_file(cls, path: Path) -> TracePrices:
        try:
            text = path.read_text()
        except (OSError, ValueError) as error:  # ValueError: not UTF-8
            raise PriceError(f"price trace {path}: {getattr(error, 'strerror', None) or error}") from None
        try:
            entries = json.loads(text)
        except ValueError as error:
            raise PriceError(f"price trace {path}: not JSON ({error})") from None
        return cls.from_entries(entries, f"price trace {path}")

    @classmethod
    def from_entries(cls, entries: Any, description: str) -> TracePrices:
        if not isinstance(entries, list):
            raise PriceError(f"{description}: expected a JSON list of {{type, az, time, price}}")
        grouped: dict[tuple[str, str], list[PricePoint]] = {}
        for number, entry in enumerate(entries, 1):
            key, point = _trace_entry(entry, f"{description}: entry {number}")
            grouped.setdefault(key, []).append(point)
        return cls(grouped, description)

    def history(self, instance_type: str, az: str, start: float, end: float) -> list[PricePoint]:
        points = self.points.get((instance_type, az)) or self.points.get((instance_type, "*")) or []
        return in_window(points, start, end)


def flat_trace(prices: Mapping[str, float], description: str) -> TracePrices:
    """One constant price per type in every AZ, in effect since the epoch."""
    return TracePrices({(kind, "*"): [PricePoint(0.0, price)] for kind, price in prices.items()}, description)


def _trace_entry(entry: Any, where: str) -> tuple[tuple[str, str], PricePoint]:
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) or not isinstance(entry.get("az"), str):
        raise PriceError(f"{where}: expected {{\"type\": str, \"az\": str, \"time\": ..., \"price\": ...}}")
    price = entry.get("price")
    if isinstance(price, bool) or not isinstance(price, int | float | str):
        raise PriceError(f"{where}: price {price!r} is not a number")
    try:
        usd = float(price)
    except ValueError:
        raise PriceError(f"{where}: price {price!r} is not a number") from None
    if not usd >= 0 or usd == float("inf"):
        raise PriceError(f"{where}: price {price!r} is not a price (USD per hour, >= 0)")
    return (entry["type"], entry["az"]), PricePoint(parse_time(entry.get("time"), where), usd)


def parse_time(value: Any, where: str) -> float:
    """Epoch seconds from a number or an ISO-8601 text (a bare time is UTC)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    raise PriceError(f"{where}: time {value!r} is neither epoch seconds nor ISO-8601")
