"""A job of several regions with no spot capacity in any of them: today's rules (capacity watch, watch.py) applied
to the group of the region the job is in, not home's. No instance has run for MAX_SPOT_WAIT, or none runs while
the job is behind its line to the deadline: that group goes on-demand (AWS's share of on-demand above the base,
100%), and launches there whatever the spot market holds."""

from __future__ import annotations

from typing import Any

from . import watch
from .market import group_market, set_group_market
from .policy import ON_DEMAND


def reason_to_hand_over(autoscaling: Any, s3: Any, *, bucket: str, job: str, group: str, since: float,
                        now: float) -> str | None:
    """Why the group should go on-demand now (None: not yet, or it already is); `since`: when an instance of the
    job last ran anywhere. Reads MAX_SPOT_WAIT, DEADLINE and QUIET_SECONDS as the capacity watch does."""
    if group_market(autoscaling, group) == ON_DEMAND:
        return None
    status = watch.read_status(s3, bucket, job)  # the active region's: the agent writes to its own
    if status.get("state") in ("DONE", "FAILED"):
        return None
    return watch.reason_to_switch(status, now - since, now)


def hand_over(autoscaling: Any, group: str) -> None:
    set_group_market(autoscaling, group, ON_DEMAND)
