"""The cache's objects in S3, through the aws CLI (the image's `python3` has no boto3): an archive per
content hash and one record, env.json, that names the archive and is written conditionally."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

CALL_SECONDS = 1800  # one call's bound: a multi-GB archive over one instance's link takes minutes
EXIT_SECONDS = 60  # from the CLI's last byte to its exit status
LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict")


class RemoteError(RuntimeError):
    """An aws CLI call failed; str() is its last line."""


def _cli() -> str:
    return os.environ.get("SPOT_AWS_CLI", "aws")


def _last_line(text: str, returncode: int) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else f"aws exited with {returncode}"


def _aws(*args: str) -> str:
    command = [_cli(), *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CALL_SECONDS)
    except subprocess.TimeoutExpired:
        raise RemoteError(f"aws {args[0]} {args[1]} took over {CALL_SECONDS}s") from None
    if done.returncode != 0:
        raise RemoteError(_last_line(done.stderr or done.stdout, done.returncode))
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


@contextmanager
def reading(uri: str) -> Iterator[IO[bytes]]:
    """The object's bytes as they arrive (`aws s3 cp URI -`). On leaving, RemoteError when the download
    failed or ran past its bound, however much of it was read: a short stream is never taken as whole."""
    with tempfile.TemporaryFile() as errors:
        # Its own process group: past the bound, the CLI and whatever it started go, and the reader sees EOF.
        process = subprocess.Popen([_cli(), "s3", "cp", "--only-show-errors", uri, "-"], stdout=subprocess.PIPE,
                                   stderr=errors, start_new_session=True)
        assert process.stdout is not None
        overran = threading.Event()

        def overrun() -> None:
            overran.set()
            _kill(process)

        watchdog = threading.Timer(CALL_SECONDS, overrun)
        watchdog.start()
        try:
            yield process.stdout
        except BaseException:
            _kill(process)
            raise
        finally:
            watchdog.cancel()
            process.stdout.close()  # a reader that stopped short: the CLI's next write fails, it exits
        try:
            process.wait(timeout=EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            _kill(process)
            raise RemoteError(f"aws s3 cp did not exit {EXIT_SECONDS}s after its last byte") from None
        if overran.is_set():
            raise RemoteError(f"aws s3 cp took over {CALL_SECONDS}s")
        if process.returncode != 0:
            errors.seek(0)
            raise RemoteError(_last_line(errors.read().decode(errors="replace"), process.returncode))


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


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
