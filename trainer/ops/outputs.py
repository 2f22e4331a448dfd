"""`outputs`: a finished job's final outputs (`<job>/final/`), or its newest published checkpoint, into a
local folder, each file checked against what S3 holds."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig

from ..storage.checkpoint_files import safe_relative
from ..storage.job_keys import FINAL, job_key
from ..storage.remote import RemoteStore, RemoteStoreError
from .aws_access import aws_errors
from .etag_check import etag_problem
from .job_stack import JobStack
from .problem import JobProblem
from .progress_line import DownloadBar, ProgressLine

PART_BYTES = 8 * 1024 * 1024


def check_destination(folder: Path) -> None:
    """An empty or new folder only: nothing of the user's is ever overwritten or mixed in."""
    if folder.exists() and not folder.is_dir():
        raise JobProblem(f"{folder} is a file: give an empty or new folder to download into")
    if folder.is_dir() and any(folder.iterdir()):
        raise JobProblem(f"{folder} is not empty: give an empty or new folder to download into")


def download_final(s3: Any, job: JobStack, folder: Path) -> list[Path]:
    """Every object under final/, verified; the folder is removed again when one does not match."""
    prefix = job_key(job.job, FINAL)
    with aws_errors(f"cannot list s3://{job.bucket}/{prefix}"):
        listing = [item for page in s3.get_paginator("list_objects_v2").paginate(Bucket=job.bucket, Prefix=prefix)
                   for item in page.get("Contents", [])]
    if not listing:
        raise JobProblem(f"job {job.job!r} has no final outputs in s3://{job.bucket}/{prefix} (they are kept once "
                         f"it is DONE); `--checkpoint` downloads its newest checkpoint", 1)
    created = not folder.exists()
    progress = ProgressLine(sum(int(item["Size"]) for item in listing))
    config = TransferConfig(multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES)
    files = []
    try:
        for item in listing:
            target = folder / safe_relative(item["Key"][len(prefix):])
            target.parent.mkdir(parents=True, exist_ok=True)
            with aws_errors(f"cannot download s3://{job.bucket}/{item['Key']}"):
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


def _clear(folder: Path, created: bool) -> None:
    """Leave things as they were: the folder gone if we made it, else empty as it was given."""
    if created:
        shutil.rmtree(folder, ignore_errors=True)
    elif folder.is_dir():
        for entry in folder.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
