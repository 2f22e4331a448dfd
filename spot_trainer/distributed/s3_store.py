"""A c10d `Store` whose keys are S3 objects under `rendezvous/<run id>/store/`.

torchrun's agents use the rendezvous store for little: rank 0 publishes the address of the round's
TCPStore (which it hosts, and which dies with the round), and the agents swap role and rank
records. A few dozen small writes per round, so polling S3 for a key costs nothing that matters,
and no node holds anything the others need once it is gone.
"""

from __future__ import annotations

import time
from datetime import timedelta
from urllib.parse import quote

import torch.distributed as dist

from .s3_objects import ConditionalObjects

POLL_SECONDS = (0.05, 1.0)  # first and longest wait between polls for a key that is not there yet
ADD_ATTEMPTS = 50
DEFAULT_TIMEOUT = timedelta(minutes=5)


def _name(key: str) -> str:
    return "store/" + quote(key, safe="")


def _bytes(value: str | bytes | list[int]) -> bytes:
    if isinstance(value, bytes):
        return value
    return value.encode() if isinstance(value, str) else bytes(value)


class S3Store(dist.Store):  # type: ignore[name-defined,misc]  # torch exports Store untyped
    def __init__(self, objects: ConditionalObjects, timeout: timedelta = DEFAULT_TIMEOUT) -> None:
        super().__init__()
        self._objects = objects
        self.set_timeout(timeout)

    def set(self, key: str, value: str | bytes) -> None:
        self._objects.put(_name(key), _bytes(value))

    def get(self, key: str) -> bytes:
        self.wait([key])
        found = self._objects.read(_name(key))
        if found is None:  # deleted between the wait and the read
            raise dist.DistStoreError(f"key {key!r} vanished from the S3 rendezvous store")
        return found[0]

    def add(self, key: str, amount: int) -> int:
        for _ in range(ADD_ATTEMPTS):
            current = self._objects.read(_name(key))
            value = (int(current[0]) if current else 0) + amount
            if self._objects.write(_name(key), str(value).encode(), expected=current[1] if current else None):
                return value
        raise dist.DistStoreError(f"add to {key!r}: {ADD_ATTEMPTS} writers in a row got there first")

    def compare_set(self, key: str, expected: str | bytes, desired: str | bytes) -> bytes:
        current = self._objects.read(_name(key))
        want, new = _bytes(expected), _bytes(desired)
        if current is None and want:
            return want  # c10d: a missing key with a non-empty expectation is returned unchanged
        if current is not None and current[0] != want:
            return current[0]
        if self._objects.write(_name(key), new, expected=current[1] if current else None):
            return new
        return self.compare_set(key, expected, desired)  # lost a race: judge again on the new value

    def check(self, keys: list[str]) -> bool:
        return all(self._objects.read(_name(key)) is not None for key in keys)

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        limit = (timeout or self.timeout).total_seconds()
        deadline, pause = time.monotonic() + limit, POLL_SECONDS[0]
        missing = list(keys)
        while missing := [key for key in missing if self._objects.read(_name(key)) is None]:
            if time.monotonic() >= deadline:
                raise dist.DistStoreError(f"timed out after {limit:.0f}s waiting for {missing[0]!r} "
                                          "in the S3 rendezvous store")
            time.sleep(pause)
            pause = min(POLL_SECONDS[1], pause * 2)

    def delete_key(self, key: str) -> bool:
        existed = self._objects.read(_name(key)) is not None
        self._objects.delete(_name(key))
        return existed

    def num_keys(self) -> int:
        return len(self._objects.names("store/"))
