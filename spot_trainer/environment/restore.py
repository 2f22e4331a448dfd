"""Before anything is installed: the environment of this key from the cache, or the reason to build it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from .archive import put_in_place, staging_beside
from .extract import Passed, extract, gnu_tar
from .phases import record_phase
from .remote import RemoteError, read_record, reading

PLAN_FILE = "environment.json"  # what the store step after the installs needs to know


@dataclass(frozen=True)
class Boot:
    app_dir: Path
    state_dir: Path
    prefix: str  # s3://bucket/job/env-cache/<key>
    key: str


def restore(boot: Boot) -> tuple[bool, str]:
    """(restored, the one line saying what happened)."""
    started = time.time()
    plan = {"key": boot.key, "prefix": boot.prefix, "replacing_etag": "", "build_started_at": started}
    try:
        restored, line = _restore(boot, plan, started)
    except RemoteError as error:
        restored, line = False, f"environment cache: {boot.prefix}/ cannot be read ({error}); installing instead"
    if not restored:
        plan["build_started_at"] = time.time()
        (boot.state_dir / PLAN_FILE).write_text(json.dumps(plan))
    return restored, line


def _restore(boot: Boot, plan: dict[str, object], started: float) -> tuple[bool, str]:
    found = read_record(f"{boot.prefix}/env.json", boot.state_dir / "env.json")
    if found is None:
        return False, f"environment cache: none yet for key {boot.key[:12]}; installing, then storing it"
    record, etag = found
    archive_uri = f"{boot.prefix}/{record.get('sha256')}.tar.gz"
    plan["replacing_etag"] = etag  # whatever goes wrong below, the rebuilt one replaces this record
    with staging_beside(boot.app_dir) as staging:
        # Downloaded and unpacked at once, into staging: in place only once the whole archive has
        # arrived, its sha256 is the one env.json names and what it holds is an environment.
        try:
            with reading(archive_uri) as stream:
                passed = extract(stream, staging, tar=gnu_tar())
        except RemoteError as error:
            return False, f"environment cache: {archive_uri} cannot be read ({error}); installing instead"
        except OSError as error:  # tar could not be started
            return False, f"environment cache: {archive_uri} does not unpack ({error}); installing instead"
        if passed.sha256 != record.get("sha256"):
            return False, f"environment cache: {archive_uri} is damaged (its sha256 is not the one env.json " \
                          "names); installing instead"
        try:
            if passed.error:
                raise ValueError(passed.error)
            put_in_place(staging, boot.app_dir)
        except (OSError, ValueError) as error:
            return False, f"environment cache: {archive_uri} does not unpack ({error}); installing instead"
    (boot.app_dir / "env-key").write_text(boot.key + "\n")
    seconds, size = time.time() - started, int(record.get("bytes") or 0)
    record_phase(boot.state_dir, "environment", "restored", seconds, size)
    return True, f"environment restored from {archive_uri} ({size} bytes) in {seconds:.1f}s ({_how(passed)})"


def _how(passed: Passed) -> str:
    return f"streamed into {passed.tool}: downloaded in {passed.downloaded_s:.1f}s, unpacked in " \
           f"{passed.unpacked_s:.1f}s"
