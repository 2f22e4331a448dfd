"""Job files on disk: `-c job=NAME` or a path → the raw TOML table → a JobSpec checked field by field
(stacks/job/) and against what its user data version can carry (stacks/instance/)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from stacks.job.spec import JOBS_DIR, JobSpec, JobSpecError


def resolve_job_path(job: str) -> Path:
    """`-c job=NAME` → jobs/NAME.toml; anything with a slash or .toml suffix is a path."""
    if "/" in job or job.endswith(".toml"):
        return Path(job)
    return JOBS_DIR / f"{job}.toml"


def read_job_file(job: str) -> tuple[dict[str, Any], Path]:
    """The raw table of a job file, unchecked (the field checks import the CDK; this does not)."""
    path = resolve_job_path(job)
    if not path.is_file():
        if meant := _likely_meant(job):
            raise JobSpecError(f"job {job!r}: no file {path}; did you mean -c job={meant}?")
        known = ", ".join(sorted(p.stem for p in JOBS_DIR.glob("*.toml")))
        raise JobSpecError(f"job {job!r}: no file {path} (jobs available: {known})")
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8-sig")), path  # -sig: editors' byte-order mark
    except UnicodeDecodeError as err:
        raise JobSpecError(f"{path}: not UTF-8 text (byte {err.start} is {err.object[err.start]:#04x}); "
                           "save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise JobSpecError(f"{path}: not valid TOML: {err}") from None


def _likely_meant(job: str) -> str | None:
    """A path without its .toml, or a file name of jobs/ given without the folder."""
    if Path(job + ".toml").is_file():
        return job + ".toml"
    if job.endswith(".toml") and "/" not in job and (JOBS_DIR / job).is_file():
        return job.removesuffix(".toml")
    return None


def load_job(job: str) -> JobSpec:
    return parse_job(*read_job_file(job))


def parse_job(data: dict[str, Any], source: Path) -> JobSpec:
    # The version check imports the CDK (the renderer lists the versions on disk): read_job_file callers
    # must not pay for it.
    from stacks.instance.version_fit import check_version_fit
    from stacks.job.fields import build_job

    try:
        job = build_job(data, source)
        check_version_fit(job)
    except JobSpecError as err:
        raise JobSpecError(f"{source}: {err}") from None
    return job
