"""S3's compare-and-set: the one primitive the lease, latest.json, the rendezvous and "the first node
records it" are built on.

A write names the version it read (`IfMatch=<etag>`), or that there was none (`IfNoneMatch="*"`); of
writers racing on the same version exactly one succeeds. S3 answers the others 412 Precondition Failed,
or 409 when two conditional writes to one key overlap, and 404 when the version named was deleted
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
"""

from __future__ import annotations

import threading
from typing import Any

from botocore.exceptions import ClientError

TAKEN_CODES = {"PreconditionFailed", "412"}  # the key exists (If-None-Match) or moved on (If-Match)
OVERLAP_CODES = {"ConditionalRequestConflict", "409"}  # another conditional write of the key was in flight
CONFLICT_CODES = TAKEN_CODES | OVERLAP_CODES
MISSING_CODES = {"NoSuchKey", "404", "NotFound"}


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def is_conflict(error: ClientError) -> bool:
    return error_code(error) in CONFLICT_CODES


def is_missing(error: ClientError) -> bool:
    return error_code(error) in MISSING_CODES


def is_taken(error: ClientError) -> bool:
    return error_code(error) in TAKEN_CODES


def is_overlap(error: ClientError) -> bool:
    return error_code(error) in OVERLAP_CODES


class CreateOnly:
    """The keys of one client whose writes must only create: their PutObject and CompleteMultipartUpload
    carry `If-None-Match: *`, so a second writer of the key gets 412 and the first one's object stays.
    CreateMultipartUpload and UploadPart take no condition; S3 checks it when the upload completes,
    answering 409 ConditionalRequestConflict when another write of the key overlapped: the upload is
    then begun again (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html;
    API reference, CompleteMultipartUpload `If-None-Match`).

    s3transfer passes no condition through its uploads (0.19: not in ALLOWED_UPLOAD_ARGS), so the header
    is added as botocore builds each request, for the keys registered here only."""

    EVENTS = ("before-parameter-build.s3.PutObject", "before-parameter-build.s3.CompleteMultipartUpload")

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, s3: Any) -> CreateOnly:
        """The client's one registry, its hook installed on first use."""
        registry = getattr(s3, "_spot_create_only", None)
        if registry is None:
            registry = cls()
            s3._spot_create_only = registry
            for event in cls.EVENTS:
                s3.meta.events.register(event, registry._condition, unique_id=f"spot-create-only-{event}")
        assert isinstance(registry, CreateOnly)
        return registry

    def add(self, keys: list[str]) -> None:
        with self._lock:
            self._keys.update(keys)

    def discard(self, keys: list[str]) -> None:
        with self._lock:
            self._keys.difference_update(keys)

    def _condition(self, params: dict[str, Any], **kwargs: Any) -> None:
        with self._lock:
            if params.get("Key") in self._keys:
                params["IfNoneMatch"] = "*"


def write_if(s3: Any, bucket: str, key: str, body: bytes, *, expected: str | None,
             content_type: str = "application/json") -> str | None:
    """Put `body` if the object is still at version `expected` (None: still absent): its new ETag, or
    None when another writer got there first. Any other failure raises."""
    condition = {"IfMatch": expected} if expected else {"IfNoneMatch": "*"}
    try:
        response = s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type, **condition)
    except ClientError as error:
        if is_conflict(error) or (expected and is_missing(error)):
            return None
        raise
    return str(response["ETag"])
