"""How the agent stops the training command: its stop signal, then up to the grace period for the
emergency checkpoint (on a spot notice, what is left of it before the reclaim), and processes the
command left behind once its main process exited."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...signals import parse_signal
from ..records.telemetry import RunTelemetry
from ..watches.notice_deadline import stop_budget
from ..watches.notice_watch import NoticeWatch
from .command import CommandProcess

LEFTOVER_SECONDS = 30.0  # how long processes may outlive the command's main process before they are stopped


@dataclass
class Stopping:
    stop_signal: str
    grace_seconds: float
    notices: NoticeWatch  # a spot notice's reclaim time shortens the grace period
    telemetry: RunTelemetry  # the last upload's time, and the log

    def leftovers(self, command: CommandProcess, main_code: int, exited_at: float) -> int | None:
        """The command's main process exited, but processes it started live on (a worker, a server it
        forgot): they get a bounded while to finish, then the stop signal; the command's code stands."""
        bound = min(LEFTOVER_SECONDS, self.grace_seconds)
        if time.monotonic() - exited_at < bound:
            return None
        self.log(f"the command exited with code {main_code} {bound:.0f}s ago, but processes it started still run: "
                 f"stopping them with {self.stop_signal}")
        command.stop(parse_signal(self.stop_signal), self.grace_seconds)
        return main_code

    def command(self, command: CommandProcess, grace_seconds: float | None = None,
                after_signal: Callable[[], None] | None = None) -> int:
        """The stop signal, then up to `grace_seconds` (the grace period) for the command to exit; its code."""
        bound = self.grace_seconds if grace_seconds is None else grace_seconds  # 0.0 left is no time, not all of it
        code = command.stop(parse_signal(self.stop_signal), bound, after_signal)
        self.log(f"command exited with code {code}")
        if code == -int(signal.SIGKILL) and self.notices.reclaim_at is not None:
            self.log("the emergency checkpoint did not fit before the reclaim: the replacement resumes from "
                     "the newest checkpoint already in S3")
        return code

    def grace_before_reclaim(self) -> float:
        """The grace period, or on a spot notice what is left of it before the reclaim once the upload
        of the emergency checkpoint is set aside (the lifecycle hook holds scale-in, never a reclaim)."""
        if self.notices.reclaim_at is None:
            return self.grace_seconds
        budget = stop_budget(self.grace_seconds, self.notices.reclaim_at, time.time(),
                             self.telemetry.last_upload_seconds)
        self.log(budget.line)
        return budget.seconds

    def log(self, line: str) -> None:
        self.telemetry.log(line)
