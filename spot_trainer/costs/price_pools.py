"""Asking a price source once per spot pool (type and AZ), over the window that covers every instance there.

A job that ran for weeks has many replacements in few pools: one paginated history per pool instead of
one per instance keeps DescribeSpotPriceHistory far from its rate limit. After one failure the source is
not asked again: no credentials or no network fails every pool the same way, each after its retries.
"""

from __future__ import annotations

from collections.abc import Iterable

from .spot_prices import PriceError, PricePoint, SpotPriceSource, in_window

Pool = tuple[str, str]  # (instance type, AZ)


class PooledPrices:
    def __init__(self, source: SpotPriceSource, spans: Iterable[tuple[Pool, float, float]]) -> None:
        self.source, self.description = source, source.description
        self.windows: dict[Pool, tuple[float, float]] = {}
        for pool, start, end in spans:
            known = self.windows.get(pool, (start, end))
            self.windows[pool] = (min(known[0], start), max(known[1], end))
        self._history: dict[Pool, list[PricePoint]] = {}
        self._failure: PriceError | None = None

    def history(self, instance_type: str, az: str, start: float, end: float) -> list[PricePoint]:
        pool = (instance_type, az)
        if pool not in self._history:
            if self._failure is not None:
                raise self._failure
            first, last = self.windows.get(pool, (start, end))
            try:
                self._history[pool] = self.source.history(instance_type, az, min(first, start), max(last, end))
            except PriceError as error:
                self._failure = error
                raise
        return in_window(self._history[pool], start, end)
