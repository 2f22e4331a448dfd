"""The job's single-writer lease: `lease.json` under the job prefix, changed only by conditional writes.

At most one agent per job trains and publishes checkpoints. The lease carries an expiry and a fencing
token that grows with every new holder, so a stale holder (paused, partitioned, still draining) can be
recognised and refused by `RemoteStore.upload` even after someone else took over. Every change is a
conditional write (conditional.py): two agents racing for the same version see exactly one success.
A released lease is kept (expired, token intact) rather than deleted, so tokens never restart at 1.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .conditional import is_missing, write_if
from .job_keys import LEASE, job_key

log = logging.getLogger(__name__)

class LeaseError(RuntimeError):
    """lease.json exists but cannot be read as a lease; the message names the object."""


@dataclass(frozen=True)
class LeaseRecord:
    owner: str
    token: int
    expires_at: float
    etag: str

    def expired(self, now: float) -> bool:
        return now >= self.expires_at


def read_lease(s3: Any, bucket: str, key: str) -> LeaseRecord | None:
    """The current lease object, or None when nobody ever took it."""
    try:
        response = s3.get_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if is_missing(error):
            return None
        raise
    try:
        body = json.loads(response["Body"].read())
        return LeaseRecord(
            owner=str(body["owner"]),
            token=int(body["token"]),
            expires_at=float(body["expires_at"]),
            etag=response["ETag"],
        )
    except (ValueError, KeyError, TypeError) as error:
        problem = f"{type(error).__name__}: {error}"
        raise LeaseError(f"s3://{bucket}/{key} is not a valid lease ({problem})") from None


class Lease:
    """A time-limited, fenced claim on `s3://bucket/<job>/lease.json`."""

    def __init__(self, s3: Any, bucket: str, job: str, *, owner: str, ttl_seconds: float = 60,
                 clock: Callable[[], float] = time.time) -> None:
        if ttl_seconds <= 0:
            raise ValueError(f"lease ttl_seconds must be positive, got {ttl_seconds}")
        self.s3, self.bucket, self.owner, self.ttl = s3, bucket, owner, float(ttl_seconds)
        self.key = job_key(job, LEASE)
        self.clock = clock  # wall-clock seconds: expiry times are compared across instances
        self.token = 0
        self._etag: str | None = None
        self._expires_at = 0.0
        # The agent renews from a thread while the publisher checks ownership: a check that read S3
        # during a renewal in flight would see our own new etag, or keep comparing against the old one,
        # and take it for a takeover. Writes and checks take turns.
        self._turn = threading.Lock()
        self.held_by: LeaseRecord | None = None  # the other holder the last acquire() found
        self._unchanged_since: tuple[str, float] | None = None  # (its ETag, when first seen so)

    def acquire(self) -> bool:
        """Take the lease if nobody holds it, it expired, or it is ours from an earlier run."""
        current = read_lease(self.s3, self.bucket, self.key)
        now = self.clock()
        if current is None:
            return self._write(token=1, expires_at=now + self.ttl, expected=None)
        if current.owner != self.owner and not current.expired(now) and not self._abandoned(current, now):
            log.info("lease held by %s (token %d) for %.0fs more", current.owner, current.token,
                     current.expires_at - now)
            self.held_by = current
            return False
        return self._write(
            token=current.token + 1, expires_at=now + self.ttl, expected=current.etag
        )

    def _abandoned(self, current: LeaseRecord, now: float) -> bool:
        """Unchanged for a whole TTL: its holder no longer renews, whatever expiry it wrote (a clock far
        ahead, a record written by hand). A live holder rewrites it every third of a TTL."""
        if self._unchanged_since is None or self._unchanged_since[0] != current.etag:
            self._unchanged_since = (current.etag, now)
            return False
        return now - self._unchanged_since[1] >= self.ttl

    def renew(self) -> bool:
        """Extend our lease; False (and no longer held) if anyone changed it since our last write."""
        if self._etag is None:
            return False
        renewed = self._write(
            token=self.token, expires_at=self.clock() + self.ttl, expected=self._etag
        )
        if not renewed:
            log.warning("lease lost: %s was taken over by another holder", self.key)
        return renewed

    def release(self) -> None:
        """Hand the lease back (expire it now) if it is still ours; the token stays for the next holder."""
        if self._etag is not None:
            self._write(token=self.token, expires_at=0.0, expected=self._etag)
        self._etag, self._expires_at = None, 0.0

    def held(self) -> bool:
        """Whether our last successful write still covers this moment (no S3 call)."""
        return self._etag is not None and self.clock() < self._expires_at

    def still_ours(self) -> bool:
        """Check S3 itself: the lease object is unchanged since our last write and not expired."""
        with self._turn:
            if not self.held():
                return False
            current = read_lease(self.s3, self.bucket, self.key)
            return current is not None and current.etag == self._etag and current.token == self.token

    def _write(self, *, token: int, expires_at: float, expected: str | None) -> bool:
        with self._turn:
            return self._write_now(token=token, expires_at=expires_at, expected=expected)

    def _write_now(self, *, token: int, expires_at: float, expected: str | None) -> bool:
        body = {"owner": self.owner, "token": token, "expires_at": expires_at, "written_at": self.clock()}
        etag = write_if(self.s3, self.bucket, self.key, json.dumps(body).encode(), expected=expected)
        if etag is None:
            self._etag, self._expires_at = None, 0.0
            return False
        self.token, self._etag, self._expires_at = token, etag, expires_at
        return True
