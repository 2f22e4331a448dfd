"""Whether a published step would restore whole, without downloading it: its manifest read, and each object
it names seen in S3 at its size and with the SHA-256 the upload recorded (held_objects.py). What a job ends
DONE on must pass this; a full restore checks every block besides."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..s3.conditional import is_missing
from ..s3.held_objects import differs, held
from ..s3.job_keys import MANIFEST
from ..s3.job_objects import JobObjects, RemoteStoreError

HEAD_THREADS = 8


def not_whole(objects: JobObjects, prefix: str) -> str:
    """Why the step under the absolute `prefix` would not restore whole ('' when it would). S3 failing to
    answer raises RemoteStoreError: that proves nothing of the step."""
    manifest = objects.get_json(prefix + MANIFEST, absolute=True)
    if manifest is None:
        return "it has no manifest"
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return "its manifest names no files"
    with ThreadPoolExecutor(max_workers=min(HEAD_THREADS, len(files))) as pool:
        found = list(pool.map(lambda item: _object_differs(objects, prefix, *item), files.items()))
    return next((f"{key}: {why}" for key, why in zip(files, found, strict=True) if why), "")


def _object_differs(objects: JobObjects, prefix: str, key: str, entry: Any) -> str:
    try:
        return differs(entry, held(objects.s3, objects.bucket, prefix + key))
    except ClientError as error:
        if is_missing(error):
            return "not in S3"
        raise RemoteStoreError(f"s3://{objects.bucket}/{prefix}{key}: {error}") from error
    except BotoCoreError as error:
        raise RemoteStoreError(f"s3://{objects.bucket}/{prefix}{key}: {error}") from error
    except (KeyError, TypeError, ValueError) as error:
        return f"its manifest entry is not one a checkpoint has ({type(error).__name__}: {error})"
