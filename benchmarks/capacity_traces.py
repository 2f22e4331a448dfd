"""Spot capacity over simulated time, as the simulation benchmarks play it: a region's minutes alternate between
available and unavailable periods of exponential lengths."""

from __future__ import annotations

import random


def trace(rng: random.Random, minutes: int, unavailability: float, outage_hours: float) -> bytearray:
    """Alternating available/unavailable periods, exponential lengths, `unavailability` of the time out."""
    out_mean = outage_hours * 60
    up_mean = out_mean * (1 - unavailability) / unavailability
    available = bytearray(minutes)
    minute, up = 0, rng.random() >= unavailability
    while minute < minutes:
        length = max(1, round(rng.expovariate(1 / (up_mean if up else out_mean))))
        if up:
            available[minute:minute + length] = b"\x01" * min(length, minutes - minute)
        minute, up = minute + length, not up
    return available
