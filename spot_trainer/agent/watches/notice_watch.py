"""Whether this instance is being taken away, asked of the instance metadata at every poll: a spot
interruption notice, a rebalance recommendation (when the job reacts to them) or scale-in."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..instance.imds import ImdsClient
from ..instance.own_group import TERMINATED
from .notice_deadline import reclaim_time

IMDS_BACKOFF_SECONDS = 30.0  # no metadata service at all (not on EC2): ask rarely
# An error from a service that is there (it answered once, or answers with an error such as a 500):
# ask again at once, a notice's two minutes cannot spare a quarter of themselves waiting.
IMDS_RETRY_SECONDS = 1.0
NOTICE_REASON = "spot interruption notice"
SCALE_IN_REASON = f"scale-in (lifecycle {TERMINATED})"  # the group chose this instance: the job's end, a pause


@dataclass
class NoticeWatch:
    imds: ImdsClient
    react_to_rebalance: bool
    log: Callable[[str], None]
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    reclaim_at: float | None = None  # epoch seconds the spot instance goes, once a notice was seen
    _retry_at: float = 0.0
    _warned: bool = False

    def reason(self) -> str | None:
        """Why the command must stop now, or None."""
        if self.clock() < self._retry_at:
            return None
        try:
            if (action := self.imds.instance_action()) is not None:
                if self.reclaim_at is None:
                    self.reclaim_at = reclaim_time(action, self.wall_clock())
                return NOTICE_REASON
            if self.react_to_rebalance and self.imds.rebalance_recommendation():
                return "rebalance recommendation"
            if (self.imds.target_lifecycle_state() or "") == TERMINATED:
                return SCALE_IN_REASON
        except Exception as error:  # no IMDS (a laptop) or a flaky moment: keep training, ask again
            self._retry_at = self.clock() + (IMDS_RETRY_SECONDS if self.imds.answered else IMDS_BACKOFF_SECONDS)
            if not self._warned:
                self._warned = True
                self.log(f"instance metadata unavailable ({error}); interruption notices cannot be seen "
                         f"until it answers (asking again in {self._retry_at - self.clock():.0f}s)")
        return None
