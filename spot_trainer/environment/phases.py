"""The boot's phases, one JSON line each in the state folder, for the agent to report as events."""

from __future__ import annotations

import json
import time
from pathlib import Path

PHASES_FILE = "boot-phases.jsonl"


def record_phase(state_dir: Path, phase: str, how: str, seconds: float, size: int = 0) -> None:
    line = {"phase": phase, "how": how, "seconds": round(seconds, 1), "bytes": size, "at": round(time.time(), 3)}
    with open(state_dir / PHASES_FILE, "a") as out:
        out.write(json.dumps(line) + "\n")
