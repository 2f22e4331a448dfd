"""A demo that cannot finish before `--timeout` says so as soon as its pace shows it, not at the timeout
(a job file meant for a GPU fleet, tried here as it is, would otherwise run for many minutes and fail)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from localcloud.journal import TrainingLog
from localcloud.player import Player

MIN_TIMED_SECONDS = 10.0  # of stepping in one stretch before its pace is trusted


def steps_per_second(logs: Iterable[TrainingLog]) -> float | None:
    """The pace of the stretch that stepped last, once it has stepped for a while."""
    stretches = [s for log in logs for s in log.stretches if s.last_step_at is not None]
    if not stretches:
        return None
    latest = max(stretches, key=lambda s: s.last_step_at or 0.0)
    if latest.seconds < MIN_TIMED_SECONDS or latest.timed_steps == 0:
        return None
    return latest.timed_steps / latest.seconds


def overrun_line(logs: Iterable[TrainingLog], total_steps: int, elapsed: float, timeout: float) -> str | None:
    """One line when the steps left, at the pace so far, end past the timeout (interruptions only add)."""
    logs = list(logs)
    pace = steps_per_second(logs)
    done = max((log.max_step or 0 for log in logs), default=0)
    if pace is None or elapsed + (total_steps - done) / pace <= timeout:
        return None
    minutes = (total_steps - done) / pace / 60
    return (f"at {pace:.1f} steps/s the {total_steps - done} steps left need about {minutes:.0f} min, past "
            f"--timeout {timeout:.0f}s: give fewer (--train-args \"... --steps N\") or a longer --timeout")


@dataclass
class PaceCheck:
    """Called every tick; says its line once."""

    total_steps: int | None
    timeout_seconds: float
    say: Callable[[str], None]
    _said: bool = False

    def __call__(self, player: Player) -> None:
        if self._said or not self.total_steps:
            return
        line = overrun_line(player.logs.values(), self.total_steps, time.time() - player.started_at,
                            self.timeout_seconds)
        if line is not None:
            self._said = True
            self.say(line)
