"""One job's prefix in S3 (`s3://<bucket>/<job>/`, job_keys.py): its keys, the small JSON objects kept
there (written plainly or conditionally, read with their ETag) and transfers of files confirmed at full
size, or for a checkpoint's files, read once as they go and confirmed against the SHA-256 S3 holds
(held_objects.py). The checkpoint store (checkpoint_store.py) and the job's records (job_records.py) build
on it."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig, create_transfer_manager
from botocore.exceptions import BotoCoreError, ClientError
from s3transfer.subscribers import BaseSubscriber

from ..failure_causes import FailureCause
from ..files.hashed_reads import HashedRead
from . import job_keys as keys
from .conditional import CreateOnly, is_missing, is_overlap, is_taken, write_if
from .held_objects import Sent, as_sent, held
from .json_object import json_object
from .s3client import transfer_config_for, upload_config_for

WRITER = "spot-writer"  # the user metadata naming who wrote an object that must only be created
OVERLAP_ATTEMPTS = 4  # an object's upload begun again after 409 ConditionalRequestConflict
CHECKSUM = {"ChecksumAlgorithm": "SHA256"}  # S3 checks each part against it and keeps the object's
HEAD_THREADS = 8  # objects confirmed at once after an upload


class RemoteStoreError(RuntimeError):
    """An S3 operation failed after botocore's retries; the message names the object and the cause."""

    def __init__(self, message: str, *, cause: FailureCause | None = None) -> None:
        super().__init__(message)
        self._cause = cause

    @property
    def cause(self) -> str:
        """What went wrong in a few words, the same for every checkpoint it fails ('' when not known)."""
        origin = self.__cause__
        if self._cause is not None:
            return self._cause.value
        if isinstance(origin, ClientError):
            return f"S3 answered {origin.response.get('Error', {}).get('Code', 'an error')}"
        if isinstance(origin, BotoCoreError):
            return f"S3 could not be reached ({type(origin).__name__})"
        return ""


class DamagedRecord(RemoteStoreError):
    """A JSON record in S3 that is not what this runtime writes (empty, HTML, a wrong type or field)."""

    def __init__(self, message: str, etag: str | None) -> None:
        super().__init__(message)
        self.etag = etag  # a conditional write may still replace it


class _Chunks(BaseSubscriber):  # type: ignore[misc]  # s3transfer ships no types
    """s3transfer's progress of a download, chunk by chunk, to one callable."""

    def __init__(self, told: Callable[[int], None]) -> None:
        self.told = told

    def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
        self.told(bytes_transferred)


class _Size(BaseSubscriber):  # type: ignore[misc]
    """The size of a stream s3transfer cannot seek, told before it is read: parts are then sized for it."""

    def __init__(self, size: int) -> None:
        self.size = size

    def on_queued(self, future: Any, **kwargs: Any) -> None:
        future.meta.provide_transfer_size(self.size)


@contextmanager
def _reads(files: dict[str, Path]) -> Iterator[dict[str, HashedRead]]:
    """Key → a HashedRead of each file, all closed on the way out."""
    with ExitStack() as stack:
        yield {key: stack.enter_context(HashedRead(path)) for key, path in files.items()}


class JobObjects:
    def __init__(self, s3: Any, bucket: str, job: str, *, transfer_config: TransferConfig | None = None,
                 instance: str | None = None) -> None:
        self.s3, self.bucket, self.job = s3, bucket, job.strip("/")
        # None: size the parts for each transfer from its total bytes (transfer_config_for).
        self.transfer = transfer_config
        self.instance = instance or os.environ.get("SPOT_INSTANCE_ID") or socket.gethostname()
        # Told of each chunk a restore downloads, and the restore's whole download (a progress bar's).
        self.on_download: Callable[[int, int], None] | None = None

    def key(self, name: str) -> str:
        return keys.job_key(self.job, name)

    # ---- small JSON objects -------------------------------------------------------------------
    def put_json(self, name: str, obj: dict[str, Any]) -> None:
        self._put(name, obj, absolute=False)

    def create_once(self, name: str, obj: dict[str, Any]) -> bool:
        """Write `name` only where it does not exist yet (`IfNoneMatch="*"`): of several nodes racing to
        record the same thing, exactly one gets True."""
        return self._put_if(name, obj, expected=None)

    def get_json(self, name: str, *, absolute: bool = False) -> dict[str, Any] | None:
        return self._get_with_etag(name, absolute=absolute)[0]

    def upload_files(self, files: dict[str, Path], prefix: str) -> int:
        """Upload name → file under `<job>/<prefix>`, each confirmed at its full size; the bytes sent."""
        sizes = {name: path.stat().st_size for name, path in files.items()}
        total = sum(sizes.values())
        self.transfer_all(((str(path), self.key(prefix + name)) for name, path in files.items()), total)
        self.confirm_sizes(self.key(prefix), sizes)
        return total

    # ---- S3 plumbing ----------------------------------------------------------------------------
    def transfer_all(self, pairs: Any, total_bytes: int, *, download: bool = False) -> None:
        """Run every (source, destination) transfer concurrently; raise on the first failure."""
        self._transfers(list(pairs), total_bytes, download=download)

    def send_all(self, files: dict[str, Path], total_bytes: int) -> dict[str, Sent]:
        """Upload key → file, each read once as it goes, then confirmed as S3 holds it (confirm_sent)."""
        with _reads(files) as reads:
            self._transfers([(read, key) for key, read in reads.items()], total_bytes)
            return self.confirm_sent(reads)

    def create_all(self, files: dict[str, Path], total_bytes: int, writers: dict[str, str]) -> dict[str, Sent]:
        """`send_all`, each object only where S3 holds none at its key yet (conditional.CreateOnly). An object
        already there that `writers[key]` wrote (this node's own earlier try) counts as sent if it holds the
        bytes read now; one another writer put there fails the whole, and stays as it was."""
        registry = CreateOnly.of(self.s3)
        pending = dict(files)
        registry.add(list(pending))
        sent: dict[str, Sent] = {}
        try:
            for _ in range(OVERLAP_ATTEMPTS):
                with _reads(pending) as reads:
                    failures = self._transfers([(read, key) for key, read in reads.items()], total_bytes,
                                               metadata={key: {WRITER: writers[key]} for key in pending})
                    again = {key: pending[key] for key, error in failures.items() if self._again(key, error, writers)}
                    sent.update(self.confirm_sent({key: read for key, read in reads.items() if key not in again}))
                if not (pending := again):
                    return sent
            raise RemoteStoreError(f"s3://{self.bucket}/{next(iter(pending))}: other writes of the key kept "
                                   "overlapping", cause=FailureCause.OVERLAPPING)
        finally:
            registry.discard(list(files))

    def _again(self, key: str, error: Exception, writers: dict[str, str]) -> bool:
        """Whether a create-only upload that failed is begun again (True), counts as sent (False), or fails
        the whole (raises)."""
        if isinstance(error, ClientError) and is_overlap(error):
            return True
        if isinstance(error, ClientError) and is_taken(error) and self._writer(key) == writers[key]:
            return False
        if isinstance(error, ClientError) and is_taken(error):
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: another writer's object is there already; "
                                   "it stays as it is", cause=FailureCause.TAKEN) from error
        raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error

    def confirm_sent(self, reads: dict[str, HashedRead]) -> dict[str, Sent]:
        """Key → each file as it went up, once S3 is seen to hold exactly the bytes its read handed out;
        raises naming the first object that differs (FailureCause.NOT_AS_SENT)."""
        def one(key: str) -> Sent | str:
            try:
                return as_sent(reads[key], held(self.s3, self.bucket, key))
            except (ClientError, BotoCoreError) as error:
                raise RemoteStoreError(f"s3://{self.bucket}/{key}: reading back its checksum: {error}") from error

        with ThreadPoolExecutor(max_workers=min(HEAD_THREADS, max(1, len(reads)))) as pool:
            found = dict(zip(reads, pool.map(one, reads), strict=True))
        for key, result in found.items():
            if isinstance(result, str):
                raise RemoteStoreError(f"s3://{self.bucket}/{key}: {result}: not published",
                                       cause=FailureCause.NOT_AS_SENT)
        return {key: result for key, result in found.items() if isinstance(result, Sent)}

    def _writer(self, key: str) -> str | None:
        try:
            return str(self.s3.head_object(Bucket=self.bucket, Key=key).get("Metadata", {}).get(WRITER))
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error

    def _transfers(self, pairs: list[tuple[Any, str]], total_bytes: int, *, download: bool = False,
                   metadata: dict[str, dict[str, str]] | None = None) -> dict[str, Exception]:
        """Every (source, destination) transfer at once; an upload's source is a file name, or a HashedRead
        (sent with S3's SHA-256 check, read once and in order). With `metadata` (uploads that only create),
        what failed, by key, once every transfer ended; without, the first failure raises at once (the rest
        cancelled)."""
        # Downloads: few large ranged GETs; uploads: parts sized for the largest file (see spot_trainer/s3client.py).
        # total_bytes bounds the largest file, so the part-count limit holds for uploads.
        config = self.transfer or (transfer_config_for(total_bytes) if download else upload_config_for(total_bytes))
        told = self.on_download
        watched = [_Chunks(lambda chunk: told(chunk, total_bytes))] if download and told is not None else None
        failed: dict[str, Exception] = {}
        with create_transfer_manager(self.s3, config) as manager:
            futures = []
            for source, dest in pairs:
                if download:
                    futures.append((source, manager.download(self.bucket, source, dest, subscribers=watched)))
                else:
                    futures.append((dest, self._upload(manager, source, dest, metadata)))
            for key, future in futures:
                try:
                    future.result()
                except (ClientError, BotoCoreError) as error:
                    if metadata is None:
                        raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error
                    failed.setdefault(key, error)
        return failed

    def _upload(self, manager: Any, source: Any, dest: str, metadata: dict[str, dict[str, str]] | None) -> Any:
        extra: dict[str, Any] = {"Metadata": metadata[dest]} if metadata else {}
        if not isinstance(source, HashedRead):
            return manager.upload(source, self.bucket, dest, extra_args=extra or None)
        return manager.upload(source, self.bucket, dest, extra_args={**extra, **CHECKSUM},
                              subscribers=[_Size(source.size)])

    def confirm_sizes(self, prefix: str, expected: dict[str, int]) -> None:
        paginator = self.s3.get_paginator("list_objects_v2")
        try:
            found = {item["Key"][len(prefix):]: item["Size"]
                     for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix)
                     for item in page.get("Contents", [])}
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{prefix}: listing to confirm sizes: {error}") from error
        wrong = [name for name, size in expected.items() if found.get(name) != size]
        if wrong:
            raise RemoteStoreError(f"s3://{self.bucket}/{prefix}{wrong[0]}: not stored with its full size")

    def _put(self, name: str, obj: dict[str, Any], *, absolute: bool = True) -> None:
        key = name if absolute else self.key(name)
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=json.dumps(obj, indent=1).encode(),
                               ContentType="application/json")
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error

    def _put_if(self, name: str, obj: dict[str, Any], *, expected: str | None) -> bool:
        """A conditional write of the job's `name` (conditional.py): False when another writer got there first."""
        return self._put_body_if(name, json.dumps(obj, indent=1).encode(), expected=expected)

    def _put_body_if(self, name: str, body: bytes, *, expected: str | None) -> bool:
        key = self.key(name)
        try:
            return write_if(self.s3, self.bucket, key, body, expected=expected) is not None
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error

    def _get_with_etag(self, name: str, *, absolute: bool = False) -> tuple[dict[str, Any] | None, str | None]:
        body, etag = self._get_body_with_etag(name, absolute=absolute)
        if body is None:
            return None, None
        key = name if absolute else self.key(name)
        try:
            return json_object(body), etag
        except ValueError as error:
            raise DamagedRecord(f"s3://{self.bucket}/{key}: {error}", etag) from error

    def _get_body_with_etag(self, name: str, *, absolute: bool = False) -> tuple[bytes | None, str | None]:
        """The object's bytes and ETag; (None, None) when there is none."""
        key = name if absolute else self.key(name)
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=key)
            return response["Body"].read(), response["ETag"]
        except ClientError as error:
            if is_missing(error):
                return None, None
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error
        except BotoCoreError as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error
