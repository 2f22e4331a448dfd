"""A command that has stopped making progress while its instance runs: stopped and started again once.

Progress is a step line or a new checkpoint. The watch acts only once it knows the command's rhythm:
after two progress signals, when nothing new came for `stall_minutes` and for twice the longest
silence between two signals seen so far, so a job that saves once an hour and prints nothing is not
taken for hung after 30 minutes, and a job with no progress signal at all is never judged. A hang is
answered with the stop signal and a restart from the newest checkpoint; a second hang at the same
step ends the job FAILED (a hang is not a preemption, and must not be retried for ever). A hang at a
later step, after progress in between, is answered again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class HangWatch:
    stall_seconds: float  # 0: never act (the job file's stall_minutes = 0: no alarm, no watchdog)
    step: int | None = None  # the newest progress: a step line's step or a checkpoint's
    last_progress_at: float | None = None
    longest_silence: float = 0.0  # between two progress signals of this run of the command
    signals: int = 0
    hung_at: int | None = None  # the step of the last hang answered with a restart
    said: str = ""  # the last hang, in one line

    def restart(self, now: float) -> None:
        """A new run of the command from `now`: any step it shows is progress (it may resume below the
        last one seen). The rhythm learned stays, so a run that hangs before its first step is judged."""
        self.step = None
        self.last_progress_at = now if self.signals else None

    def saw(self, step: int | None, now: float) -> None:
        """The newest step the command has shown by `now` (a step line or a checkpoint); None: nothing yet.
        Any change is progress: a command started again redoes steps below the last one it showed."""
        if step is None or step == self.step:
            return
        if self.last_progress_at is not None:
            self.longest_silence = max(self.longest_silence, now - self.last_progress_at)
        self.step, self.last_progress_at, self.signals = step, now, self.signals + 1

    def limit(self) -> float | None:
        """Seconds of silence taken for a hang; None while the watch does not act."""
        if self.stall_seconds <= 0 or self.signals < 2:
            return None
        return max(self.stall_seconds, 2 * self.longest_silence)

    def hung(self, now: float) -> bool:
        limit = self.limit()
        return limit is not None and self.last_progress_at is not None and now - self.last_progress_at >= limit

    def again_at_the_same_step(self) -> bool:
        """True when this hang is at the step of the one answered before: the job ends FAILED."""
        repeated = self.hung_at is not None and self.hung_at == self.step
        self.hung_at = self.step
        return repeated

    def line(self, now: float) -> str:
        silent = now - (self.last_progress_at or now)
        self.said = f"no progress for {silent / 60:.1f} min at step {self.step} (no step line, no new checkpoint)"
        return self.said
