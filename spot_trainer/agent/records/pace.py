"""A node's training pace: seconds per step, from the steps it trained itself (the deadline policy's
judge of progress, and the status record's basis for the cost to finish)."""

from __future__ import annotations

from dataclasses import dataclass

MIN_PACE_STEPS = 10  # a pace from fewer steps is mostly start-up noise, enough to flip a market


@dataclass
class Pace:
    """Seconds per step on this instance, measured from the first step it trained (the step it
    restored, start-up and restore excluded) over at least MIN_PACE_STEPS steps."""

    restored: int | None = None
    first: tuple[float, int] | None = None

    def seconds_per_step(self, now: float, step: int) -> float | None:
        if self.restored is None:
            self.restored = step  # carried over from the last run: no step of ours yet
            return None
        if self.first is None:
            if step != self.restored:
                self.first = (now, step)
            return None
        since, from_step = self.first
        return (now - since) / (step - from_step) if step - from_step >= MIN_PACE_STEPS else None
