"""S3's compare-and-set: the one primitive the lease, latest.json, the rendezvous and "the first node
records it" are built on.

A write names the version it read (`IfMatch=<etag>`), or that there was none (`IfNoneMatch="*"`); of
writers racing on the same version exactly one succeeds. S3 answers the others 412 Precondition Failed,
or 409 when two conditional writes to one key overlap, and 404 when the version named was deleted
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
MISSING_CODES = {"NoSuchKey", "404", "NotFound"}


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def is_conflict(error: ClientError) -> bool:
    return error_code(error) in CONFLICT_CODES


def is_missing(error: ClientError) -> bool:
    return error_code(error) in MISSING_CODES


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
