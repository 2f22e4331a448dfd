"""Small S3 objects changed only by conditional writes (storage/s3/conditional.py): two nodes racing on
the same version see exactly one success, which is what torch's dynamic rendezvous asks of its backend
(compare-and-set with a fencing token).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from ..storage.s3.conditional import is_missing, write_if


class S3ObjectError(RuntimeError):
    """S3 refused or failed a request; the message names the object."""


class Listed(NamedTuple):
    etag: str
    modified: datetime  # S3's LastModified: S3's clock


@dataclass(frozen=True)
class Listing:
    """What one LIST saw: each object's ETag and LastModified, and S3's clock when it answered (its Date
    header), or None where the answer carried no readable Date."""

    objects: dict[str, Listed]
    s3_now: datetime | None


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

    def listing(self, under: str) -> Listing:
        """Every object whose name starts with `under`, with its ETag and LastModified: one request up to
        1,000 objects."""
        paginator = self.s3.get_paginator("list_objects_v2")
        found: dict[str, Listed] = {}
        s3_now: datetime | None = None
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key(under)):
                s3_now = s3_now or _response_date(page)
                for item in page.get("Contents", []):
                    found[item["Key"][len(self.prefix):]] = Listed(str(item["ETag"]), item["LastModified"])
        except ClientError as error:
            raise S3ObjectError(f"listing s3://{self.bucket}/{self.key(under)}: {error}") from error
        return Listing(found, s3_now)


def _response_date(page: dict[str, Any]) -> datetime | None:
    """The Date header of a response: S3's clock to the second. A proxy may add its own after it (a
    header repeated is joined with ', '), so only the first IMF-fixdate (29 characters) is read."""
    header = str(page.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date", ""))
    try:
        return parsedate_to_datetime(header[:29]) if header else None
    except (TypeError, ValueError):
        return None
