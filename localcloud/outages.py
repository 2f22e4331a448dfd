"""Spot capacity outages of the local spot cloud: windows of the run in which no spot instance
launches, and at whose start the running spot instances are reclaimed (with the usual notice).
On-demand instances are not affected: that is what a job falls back to."""

from __future__ import annotations

from dataclasses import dataclass

from localcloud.interruptions import PlanError


@dataclass(frozen=True)
class SpotOutage:
    start: float  # seconds after the run began
    length: float

    def covers(self, elapsed: float) -> bool:
        return self.start <= elapsed < self.start + self.length


def parse_outage(text: str) -> SpotOutage:
    """'40:90' → no spot capacity from 40 s to 130 s into the run."""
    start, colon, length = text.partition(":")
    try:
        outage = SpotOutage(float(start), float(length))
    except ValueError:
        raise PlanError(f"--spot-outage {text!r}: expected START:LENGTH in seconds, like 40:90") from None
    if not colon or outage.start < 0 or outage.length <= 0:
        raise PlanError(f"--spot-outage {text!r}: expected START:LENGTH in seconds, like 40:90")
    return outage


def spot_available(outages: list[SpotOutage], elapsed: float) -> bool:
    return not any(outage.covers(elapsed) for outage in outages)


def outages_begun(outages: list[SpotOutage], before: float, now: float) -> list[SpotOutage]:
    """The outages that began in (before, now]: their start reclaims the running spot instances."""
    return [outage for outage in outages if before < outage.start <= now]
