"""The FAILED record over a job's status: one spelling for the agent (fatal.py) and for user data.

A bootstrap that fails once the runtime is installed runs
`python -P -m spot_trainer.agent.failed_record FILE STEP REASON EXIT_CODE INSTANCE JOB` on the status it
downloaded (userdata/lib/failure_record.sh); before that, the script's fallback writes the same fields.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..storage.record_kinds import JobState
from .records import status as states


def failed_record(previous: Mapping[str, Any] | None, job: str, instance: str, reason: str) -> dict[str, Any]:
    """FAILED over the job's record, keeping its counters and progress, one more failure counted."""
    record = asdict(states.JobStatus.carried_over(previous, job, instance))
    record.update(state=JobState.FAILED, reason=reason, failures=int((previous or {}).get("failures") or 0) + 1)
    return record


def record_bootstrap_failure(path: Path, step: str, reason: str, exit_code: int, instance: str, job: str) -> None:
    """FAILED over the status in `path` (absent or unreadable: none yet), with the step that failed."""
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError):
        previous = None
    record = failed_record(previous if isinstance(previous, dict) else None, job, instance,
                           f"bootstrap step {step}: {reason}")
    record["bootstrap"] = {"step": step, "exit_code": exit_code}
    path.write_text(json.dumps(record))


if __name__ == "__main__":
    file, step, reason, exit_code, instance, job = sys.argv[1:]
    record_bootstrap_failure(Path(file), step, reason, int(exit_code), instance, job)
