"""How long the command may take to save after a spot notice: the instance is reclaimed at the notice's
own `time`, two minutes after it appears, whatever the agent is doing. What is left after the upload
of the emergency checkpoint (estimated from this job's last measured upload) goes to the command.
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ...settings import AFTER_UPLOAD_SECONDS, NOTICE_SECONDS, UPLOAD_SAFETY


def reclaim_time(action: dict[str, Any] | None, seen_at: float) -> float:
    """Epoch seconds when the instance goes: the notice's `time` (UTC, e.g. 2026-11-26T06:30:00Z), or
    two minutes after the notice was first seen when it names none or one that does not parse."""
    text = str((action or {}).get("time", ""))
    try:
        when = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return seen_at + NOTICE_SECONDS
    return min(when, seen_at + NOTICE_SECONDS)


@dataclass(frozen=True)
class StopBudget:
    seconds: float  # how long the command may take to save and exit
    upload_seconds: float  # what the upload of its checkpoint is expected to take
    fits: bool  # whether a save and its upload both fit before the reclaim
    left: float  # seconds until the reclaim

    @property
    def line(self) -> str:
        """What the agent logs on the notice."""
        if self.fits:
            return (f"reclaimed in {self.left:.0f}s: the command has {self.seconds:.0f}s to save, "
                    f"{self.upload_seconds:.0f}s kept for its upload")
        return (f"WARNING: reclaimed in {self.left:.0f}s, and this job's last upload took "
                f"{self.upload_seconds / UPLOAD_SAFETY:.0f}s: an emergency checkpoint may not reach S3 in time; "
                f"the command has {self.seconds:.0f}s to save")


def stop_budget(grace_seconds: float, reclaim_at: float, now: float, last_upload_seconds: float | None) -> StopBudget:
    """The grace period, cut to what is left before the reclaim once the upload is set aside. The
    command always gets half of what is left: a save that cannot be uploaded in time may still be."""
    left = max(0.0, reclaim_at - now)
    upload = UPLOAD_SAFETY * (last_upload_seconds or 0.0)
    room = left - upload - AFTER_UPLOAD_SECONDS
    seconds = min(grace_seconds, max(room, left / 2))
    return StopBudget(seconds=seconds, upload_seconds=upload, fits=room > 0, left=left)
