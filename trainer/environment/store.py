"""After a boot that installed: the venv and the runtime packed, uploaded under their own sha256, then
the record, conditionally. Nothing of it is needed to train: a failure here is one line, not an error."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .archive import pack
from .key import sha256_of
from .phases import record_phase
from .remote import RemoteError, delete, upload, write_record
from .restore import PLAN_FILE


def store(app_dir: Path, state_dir: Path, *, python: str, instance: str) -> str:
    started = time.time()
    if not (state_dir / PLAN_FILE).exists():
        return ""  # restored, or the cache is off
    plan = json.loads((state_dir / PLAN_FILE).read_text())
    built = started - float(plan["build_started_at"])
    if Path(python) != app_dir / "venv" / "bin" / "python3":
        record_phase(state_dir, "environment", "image", built)
        return "environment cache: nothing to keep (the image's Python and torch are used as they are)"
    with tempfile.TemporaryDirectory(dir=state_dir) as folder:
        archive, record = Path(folder) / "environment.tar.gz", Path(folder) / "env.json"
        size = pack(app_dir, archive)
        sha = sha256_of(archive)
        pack_seconds = time.time() - started
        record.write_text(json.dumps({"sha256": sha, "bytes": size, "instance": instance,
                                      "build_seconds": round(built, 1), "pack_seconds": round(pack_seconds, 1)}))
        archive_uri = f"{plan['prefix']}/{sha}.tar.gz"
        try:
            upload(archive, archive_uri)
            won = write_record(record, f"{plan['prefix']}/env.json", replacing_etag=plan["replacing_etag"])
            if not won:
                delete(archive_uri)
        except RemoteError as error:
            record_phase(state_dir, "environment", "built", built)
            return f"environment cache: not stored ({error})"
    record_phase(state_dir, "environment", "built", built, size)
    (state_dir / PLAN_FILE).unlink()
    if not won:
        return "environment cache: another instance stored this environment first; keeping theirs"
    (app_dir / "env-key").write_text(str(plan["key"]) + "\n")
    return f"environment stored in {archive_uri} ({size} bytes, packed and uploaded in {time.time() - started:.1f}s)"
