"""The boot's phases as the job's events, so what a replacement costs before it trains is measured on
every instance: `boot` (the agent started, seconds after the instance's launch; how its environment came:
built, restored from the env cache, or the image's, with seconds and bytes, as user data recorded them
in boot-phases.jsonl) and `first_step` (this agent's first trained step, seconds after launch). The
`start` and `resume` events carry their seconds since launch too."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...storage.record_kinds import EventKind
from .instance_record import launched_at

TIMED_EVENTS = (EventKind.START, EventKind.RESUME, EventKind.FIRST_STEP)
# User data's record of its phases: in its state folder, the agent's working directory (agent_config.sh).
PHASES_FILE = Path("boot-phases.jsonl")


def _launch_time() -> float | None:
    try:
        return launched_at(os.environ.get("SPOT_LAUNCHED_AT", ""), Path("/proc/uptime"), time.time)
    except ValueError:
        return None


def environment_phase(path: Path) -> dict[str, Any]:
    """The last environment phase user data recorded: {"how", "seconds", "bytes"}, or {} when none."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            phase = json.loads(line)
        except ValueError:
            continue
        if isinstance(phase, dict) and phase.get("phase") == "environment":
            return {"how": phase.get("how"), "seconds": phase.get("seconds"), "bytes": phase.get("bytes")}
    return {}


@dataclass
class BootClock:
    launched: float | None
    phases: Path = PHASES_FILE
    booted: bool = False
    stepped: bool = False

    @classmethod
    def from_environment(cls) -> BootClock:
        return cls(_launch_time())

    def since_launch(self) -> float | None:
        return None if self.launched is None else round(time.time() - self.launched, 1)

    def timed(self, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        """`fields` with `since_launch_s` for the events that mark the boot's progress."""
        return {**fields, "since_launch_s": self.since_launch()} if kind in TIMED_EVENTS else fields

    def boot_fields(self) -> dict[str, Any] | None:
        """The `boot` event's fields, once per agent process."""
        if self.booted:
            return None
        self.booted = True
        return {"agent_started_s": self.since_launch(), "environment": environment_phase(self.phases)}

    def first_step(self, step: Any) -> dict[str, Any] | None:
        """The `first_step` event's fields the first time this agent sees a trained step."""
        if self.stepped or not isinstance(step, int):
            return None
        self.stepped = True
        return {"step": step}
