"""The cost of an interval at a piecewise-constant price: Σ hours at each price × that price."""

from __future__ import annotations

from collections.abc import Sequence

from .spot_prices import PricePoint


def cost_over(points: Sequence[PricePoint], start: float, end: float) -> float:
    """USD for [start, end] at the prices `points` give (time order: each holds until the next).

    Before the first point its price is used: a history that starts late (EC2 keeps 90 days) still
    prices the whole interval; `covers` tells the caller whether that happened.
    """
    if end <= start or not points:
        return 0.0
    total = 0.0
    for index, point in enumerate(points):
        since = start if index == 0 else max(start, point.time)
        until = min(end, points[index + 1].time) if index + 1 < len(points) else end
        if until > since:
            total += (until - since) / 3600 * point.price
    return total


def covers(points: Sequence[PricePoint], start: float) -> bool:
    """Whether the history knows the price in effect at `start`."""
    return bool(points) and points[0].time <= start
