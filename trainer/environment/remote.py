"""The cache's objects in S3, through the aws CLI (the image's `python3` has no boto3): an archive per
content hash and one record, env.json, that names the archive and is written conditionally."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

CALL_SECONDS = 1800  # one call's bound: a multi-GB archive over one instance's link takes minutes
LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict")


class RemoteError(RuntimeError):
    """An aws CLI call failed; str() is its last line."""


def _aws(*args: str) -> str:
    command = [os.environ.get("SPOT_AWS_CLI", "aws"), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CALL_SECONDS)
    except subprocess.TimeoutExpired:
        raise RemoteError(f"aws {args[0]} {args[1]} took over {CALL_SECONDS}s") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise RemoteError(lines[-1] if lines else f"aws exited with {done.returncode}")
    return done.stdout


def _bucket_key(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def read_record(uri: str, into: Path) -> tuple[dict[str, Any], str] | None:
    """The record and its ETag; None when there is none."""
    bucket, key = _bucket_key(uri)
    try:
        answer = json.loads(_aws("s3api", "get-object", "--bucket", bucket, "--key", key, str(into)))
    except RemoteError as error:
        if "NoSuchKey" in str(error) or "Not Found" in str(error) or "404" in str(error):
            return None
        raise
    return json.loads(into.read_text()), str(answer["ETag"])


def download(uri: str, path: Path) -> None:
    _aws("s3", "cp", "--only-show-errors", uri, str(path))


def upload(path: Path, uri: str) -> None:
    _aws("s3", "cp", "--only-show-errors", str(path), uri)


def delete(uri: str) -> None:
    _aws("s3", "rm", "--only-show-errors", uri)


def write_record(path: Path, uri: str, *, replacing_etag: str = "") -> bool:
    """Only where no record is (or, over a damaged one, where it is still the one read): False when
    another instance wrote first."""
    bucket, key = _bucket_key(uri)
    condition = ["--if-match", replacing_etag] if replacing_etag else ["--if-none-match", "*"]
    try:
        _aws("s3api", "put-object", "--bucket", bucket, "--key", key, "--body", str(path), *condition)
    except RemoteError as error:
        if any(code in str(error) for code in LOST_RACE):
            return False
        raise
    return True
