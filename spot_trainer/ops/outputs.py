"""`outputs`: a finished job's final outputs (`<job>/final/`), or its newest published checkpoint, into a
local folder, each file checked against what S3 holds."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig

from ..storage.s3.job_keys import FINAL, job_key
from ..storage.steps.remote import RemoteStore, RemoteStoreError
from .aws_access import aws_errors
from .etag_check import etag_problem
from .job_stack import JobStack
from .problem import JobProblem
from .progress_line import DownloadBar, ProgressLine

PART_BYTES = 8 * 1024 * 1024
SHOWN_KEYS = 3  # keys named in a refusal; more are counted
ANOTHER_FOLDER = "name an empty or new folder to download into with --to FOLDER"


def check_destination(folder: Path) -> None:
    """An empty or new folder only: nothing of the user's is ever overwritten or mixed in."""
    if folder.exists() and not folder.is_dir():
        raise JobProblem(f"{folder} is a file: {ANOTHER_FOLDER}")
    if folder.is_dir() and any(folder.iterdir()):
        raise JobProblem(f"{folder} is not empty: {ANOTHER_FOLDER}")


def final_files(listing: list[dict[str, Any]], prefix: str, bucket: str) -> list[tuple[dict[str, Any], str]]:
    """(object, its name inside the folder) for each file under final/, folder markers (a zero-byte key
    ending in `/`, as the S3 console's "Create folder" makes) left out. A key that cannot be a file inside
    the folder (a `..`, `.` or empty part, or a leading `/`) refuses the whole download before anything is
    written: such a key is no output of the agent's, and the bucket's owner decides what it is."""
    files, hostile = [], []
    for item in listing:
        name = str(item["Key"])[len(prefix):]
        if name.endswith("/") and int(item["Size"]) == 0:
            continue
        parts = name.split("/")
        if not name or name.startswith("/") or "\0" in name or any(p in ("", ".", "..") for p in parts):
            hostile.append(str(item["Key"]))
        else:
            files.append((item, name))
    if hostile:
        named = ", ".join(repr(key) for key in hostile[:SHOWN_KEYS])
        more = f" and {len(hostile) - SHOWN_KEYS} more" if len(hostile) > SHOWN_KEYS else ""
        raise JobProblem(f"s3://{bucket}/{prefix} holds {len(hostile)} key(s) that cannot be a file inside a folder "
                         f"(a `..`, `.` or empty part, or a leading `/`): {named}{more}; rename or delete them in "
                         "the bucket, or download the checkpoint with --checkpoint; nothing was written", 1)
    return files


def download_final(s3: Any, job: JobStack, folder: Path) -> list[Path]:
    """Every object under final/, verified; the folder is removed again when one does not match."""
    prefix = job_key(job.job, FINAL)
    with aws_errors(f"cannot list s3://{job.bucket}/{prefix}"):
        listing = [item for page in s3.get_paginator("list_objects_v2").paginate(Bucket=job.bucket, Prefix=prefix)
                   for item in page.get("Contents", [])]
    if not listing:
        raise JobProblem(f"job {job.job!r} has no final outputs in s3://{job.bucket}/{prefix} (they are kept once "
                         f"it is DONE); `--checkpoint` downloads its newest checkpoint", 1)
    wanted = final_files(listing, prefix, job.bucket)
    created = not folder.exists()
    progress = ProgressLine(sum(int(item["Size"]) for item, _ in wanted))
    config = TransferConfig(multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES)
    files = []
    try:
        for item, name in wanted:
            target = folder / name
            with written(target), aws_errors(f"cannot download s3://{job.bucket}/{item['Key']}"):
                target.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(job.bucket, item["Key"], str(target), Callback=progress, Config=config)
            if problem := etag_problem(target, int(item["Size"]), str(item["ETag"])):
                raise JobProblem(f"{target} does not match s3://{job.bucket}/{item['Key']}: {problem}", 1)
            files.append(target)
    except BaseException:
        _clear(folder, created)
        raise
    finally:
        progress.end()
    return files


def download_checkpoint(s3: Any, job: JobStack, folder: Path) -> tuple[int, Path]:
    """The newest published checkpoint that restores (the manifest's sizes and SHA-256s), as training would."""
    store = RemoteStore(s3, job.bucket, job.job, instance="user")
    bar = DownloadBar()
    store.on_download = bar
    created = not folder.exists()
    try:
        with aws_errors(f"cannot read s3://{job.bucket}/{job.job}/"):
            restored = store.restore(folder)
    except (RemoteStoreError, JobProblem):
        _clear(folder, created)
        raise
    finally:
        bar.end()
    if restored is None or store.restored_step is None:
        _clear(folder, created)
        raise JobProblem(f"job {job.job!r} has no checkpoint that restores in s3://{job.bucket}/{job.job}/", 1)
    return store.restored_step, restored


@contextlib.contextmanager
def written(target: Path) -> Iterator[None]:
    """This disk refusing a file (full, read-only, a file where a folder must go) as one line naming it."""
    try:
        yield
    except OSError as error:
        raise JobProblem(f"cannot write {target}: {error.strerror or error}; nothing was kept", 1) from error


def _clear(folder: Path, created: bool) -> None:
    """Leave things as they were: the folder gone if we made it, else empty as it was given."""
    if created:
        shutil.rmtree(folder, ignore_errors=True)
    elif folder.is_dir():
        for entry in folder.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
