"""After a boot that installed: the build recorded at once (the agent reports it), then the venv and the
runtime packed, uploaded under their own sha256, and the record written conditionally, while the agent
already trains. Nothing of it is needed to train: a failure here is one line, not an error."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from .archive import pack
from .key import sha256_of
from .phases import record_phase
from .remote import RemoteError, delete, upload, write_record
from .restore import PLAN_FILE


def begin(app_dir: Path, state_dir: Path, *, python: str) -> tuple[str, dict[str, Any] | None]:
    """(the line to log, the plan to pack when there is something to keep)."""
    if not (state_dir / PLAN_FILE).exists():
        return "", None  # restored, or the cache is off
    plan = json.loads((state_dir / PLAN_FILE).read_text())
    (state_dir / PLAN_FILE).unlink()
    plan["built_seconds"] = round(time.time() - float(plan["build_started_at"]), 1)
    if Path(python) != app_dir / "venv" / "bin" / "python3":
        record_phase(state_dir, "environment", "image", plan["built_seconds"])
        return "environment cache: nothing to keep (the image's Python and torch are used as they are)", None
    record_phase(state_dir, "environment", "built", plan["built_seconds"])
    return f"environment built in {plan['built_seconds']}s; storing it in {plan['prefix']}/ meanwhile", plan


def finish(app_dir: Path, state_dir: Path, plan: dict[str, Any], *, instance: str) -> str:
    started = time.time()
    with tempfile.TemporaryDirectory(dir=state_dir) as folder:
        archive, record = Path(folder) / "environment.tar.gz", Path(folder) / "env.json"
        size = pack(app_dir, archive)
        sha = sha256_of(archive)
        record.write_text(json.dumps({"sha256": sha, "bytes": size, "instance": instance,
                                      "build_seconds": plan["built_seconds"],
                                      "pack_seconds": round(time.time() - started, 1)}))
        archive_uri = f"{plan['prefix']}/{sha}.tar.gz"
        try:
            upload(archive, archive_uri)
            won = write_record(record, f"{plan['prefix']}/env.json", replacing_etag=plan["replacing_etag"])
            if not won:
                delete(archive_uri)
        except RemoteError as error:
            return f"environment cache: not stored ({error})"
    if not won:
        return "environment cache: another instance stored this environment first; keeping theirs"
    (app_dir / "env-key").write_text(str(plan["key"]) + "\n")
    return f"environment stored in {archive_uri} ({size} bytes, packed and uploaded in {time.time() - started:.1f}s)"
