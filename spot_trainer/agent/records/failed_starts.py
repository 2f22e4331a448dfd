"""Starts of the agent that failed the same way, counted on this instance, so that a failure a restart
cannot mend ends the job instead of looping.

systemd restarts an agent that exits 1 (S3 or the network not answering, a lease lost) every
RestartSec, forever. A cause that goes away (S3 back, the lease free) lets a later start go on and clears
the count; one that does not (a disk too small, a bucket policy that refuses the role) gives the same
line each time. After SAME_FAILURES of those in a row the agent ends the job FAILED with that line,
as fatal.py does for what is known to be final at once.

The count lives in one small file beside the agent's settings file (systemd always passes --env-file);
without one (a test, a laptop) nothing is counted.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

SAME_FAILURES = 10  # at RestartSec=10 and S3's own retries: two minutes or more of the same failure
START_SECONDS = 600.0  # an agent that ran longer than this before failing did start: the count begins anew
FILE_NAME = "failed-starts.json"


@dataclass(frozen=True)
class FailedStarts:
    path: Path | None

    @classmethod
    def beside(cls, env_file: Path | None) -> FailedStarts:
        return cls(None if env_file is None else env_file.parent / FILE_NAME)

    def count(self, message: str, ran_seconds: float) -> int:
        """This failure recorded; how many starts in a row failed with exactly this line (1 when it is new,
        when the run lasted past START_SECONDS, or when nothing can be counted)."""
        if self.path is None:
            return 1
        last = self._read()
        before = last.get("count")
        same = last.get("message") == message and ran_seconds <= START_SECONDS
        count = before + 1 if same and isinstance(before, int) else 1
        try:
            temporary = self.path.with_name(f".{FILE_NAME}.{os.getpid()}")
            temporary.write_text(json.dumps({"message": message, "count": count, "at": time.time()}))
            temporary.replace(self.path)
        except OSError:
            return 1  # a disk that cannot take this small file: counting must never add a failure
        return count

    def clear(self) -> None:
        """The agent got going: earlier failures say nothing about the next start."""
        if self.path is not None:
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass

    def _read(self) -> dict[str, object]:
        try:
            record = json.loads(self.path.read_text()) if self.path is not None else {}
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}
