"""Spot capacity outages of the local spot cloud: windows of the run in which no spot instance
launches, and at whose start the running spot instances are reclaimed (with the usual notice).
On-demand instances are not affected: that is what a job falls back to."""

from __future__ import annotations

from dataclasses import dataclass, field

from localcloud.interruptions import PlanError


@dataclass(frozen=True)
class SpotOutage:
    start: float  # seconds after the run began, or after S3 first held `after_step`
    length: float
    # Counted from an event, not the clock: the outage meets a job that has saved this step, on a busy
    # machine whose instances take longer to boot as on an idle one.
    after_step: int | None = None

    def covers(self, elapsed: float) -> bool:
        return self.start <= elapsed < self.start + self.length

    def placed(self, elapsed: float, latest_step: int | None) -> SpotOutage | None:
        """This outage counted from the run's start: itself, or once S3 holds `after_step` (seen `elapsed`
        seconds into the run) one starting that much later; None while its step is not in S3 yet."""
        if self.after_step is None:
            return self
        if latest_step is None or latest_step < self.after_step:
            return None
        return SpotOutage(elapsed + self.start, self.length)


def parse_outage(text: str) -> SpotOutage:
    """'40:90' → no spot capacity from 40 s to 130 s into the run; 'step30:90' → for 90 s from the moment
    S3 holds step 30 (the same point of the job on a machine of any pace)."""
    start, colon, length = text.partition(":")
    after_step = None
    if start.startswith("step"):
        start, after_step = "0", start.removeprefix("step")
    try:
        outage = SpotOutage(float(start), float(length), int(after_step) if after_step is not None else None)
    except ValueError:
        raise PlanError(f"--spot-outage {text!r}: expected START:LENGTH in seconds, like 40:90, "
                        "or stepN:LENGTH, like step30:90") from None
    if not colon or outage.start < 0 or outage.length <= 0 or (outage.after_step is not None and outage.after_step < 0):
        raise PlanError(f"--spot-outage {text!r}: expected START:LENGTH in seconds, like 40:90, "
                        "or stepN:LENGTH, like step30:90")
    return outage


def spot_available(outages: list[SpotOutage], elapsed: float) -> bool:
    return not any(outage.covers(elapsed) for outage in outages)


def outages_begun(outages: list[SpotOutage], before: float, now: float) -> list[SpotOutage]:
    """The outages that began in (before, now]: their start reclaims the running spot instances."""
    return [outage for outage in outages if before < outage.start <= now]


@dataclass
class OutageClock:
    """The run's planned outages as they are placed in time, read against the run's clock."""

    planned: list[SpotOutage]
    elapsed: float = 0.0  # seconds into the run, as of the last advance
    _placed: list[SpotOutage] = field(default_factory=list)
    _placed_from: set[int] = field(default_factory=set)  # which planned outages are placed

    def advance(self, elapsed: float, latest_step: int | None) -> bool:
        """The clock moved to `elapsed` (S3 holding `latest_step`): True when an outage began since the last move."""
        before, self.elapsed = self.elapsed, elapsed
        for index, outage in enumerate(self.planned):
            if index not in self._placed_from and (placed := outage.placed(elapsed, latest_step)) is not None:
                self._placed_from.add(index)
                self._placed.append(placed)
        return bool(outages_begun(self._placed, before, elapsed))

    def spot_available(self) -> bool:
        return spot_available(self._placed, self.elapsed)

    def placed(self) -> list[SpotOutage]:
        """The outages placed in time so far, counted from the run's start."""
        return list(self._placed)
