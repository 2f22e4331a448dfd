"""Small S3 objects changed only by conditional writes (storage/conditional.py): two nodes racing on
the same version see exactly one success, which is what torch's dynamic rendezvous asks of its backend
(compare-and-set with a fencing token).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ..storage.conditional import is_missing, write_if


class S3ObjectError(RuntimeError):
    """S3 refused or failed a request; the message names the object."""


class ConditionalObjects:
    """Objects under one prefix of one bucket, read with their ETag, written conditionally."""

    def __init__(self, s3: Any, bucket: str, prefix: str) -> None:
        self.s3, self.bucket, self.prefix = s3, bucket, prefix.strip("/") + "/"

    def key(self, name: str) -> str:
        return self.prefix + name

    def read(self, name: str) -> tuple[bytes, str] | None:
        """(body, etag), or None when the object does not exist."""
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=self.key(name))
            return response["Body"].read(), str(response["ETag"])
        except ClientError as error:
            if is_missing(error):
                return None
            raise S3ObjectError(f"reading s3://{self.bucket}/{self.key(name)}: {error}") from error

    def write(self, name: str, body: bytes, *, expected: str | None) -> str | None:
        """Write if the object is still at `expected` (None: still absent); its new etag, or None
        when another writer got there first."""
        try:
            return write_if(self.s3, self.bucket, self.key(name), body, expected=expected,
                            content_type="application/octet-stream")
        except ClientError as error:
            raise S3ObjectError(f"writing s3://{self.bucket}/{self.key(name)}: {error}") from error

    def put(self, name: str, body: bytes) -> None:
        try:
            self.s3.put_object(Bucket=self.bucket, Key=self.key(name), Body=body)
        except ClientError as error:
            raise S3ObjectError(f"writing s3://{self.bucket}/{self.key(name)}: {error}") from error

    def delete(self, name: str) -> None:
        try:
            self.s3.delete_object(Bucket=self.bucket, Key=self.key(name))
        except ClientError as error:
            raise S3ObjectError(f"deleting s3://{self.bucket}/{self.key(name)}: {error}") from error

    def names(self, under: str = "") -> list[str]:
        paginator = self.s3.get_paginator("list_objects_v2")
        found: list[str] = []
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key(under)):
                found += [item["Key"][len(self.prefix):] for item in page.get("Contents", [])]
        except ClientError as error:
            raise S3ObjectError(f"listing s3://{self.bucket}/{self.key(under)}: {error}") from error
        return found
