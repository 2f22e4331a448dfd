"""`latest.json`, the job's pointer to its newest published checkpoint, as a type: the one writer and reader of
that record, for the store that publishes it, the `status` command, the regions controller and the local cloud.

    {"step": 120, "key": "<job>/checkpoints/step-00000120/", "lease_token": 3, "written_at": 1760000000.5}

`step` and `lease_token` must be whole numbers (a step not below 0): anything else is a damaged record, which
the store names and replaces (checkpoint_store.py). `key` and `written_at` are told, never trusted: a record
written without them still reads. Standard library only, so whatever watches a bucket may read it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from .json_object import json_object


@dataclass(frozen=True)
class LatestRecord:
    step: int
    key: str = ""  # the step's prefix in the bucket ('' when the record does not say)
    lease_token: int = 0  # the fencing token of the lease its publisher held (0: published without one)
    written_at: float = 0.0  # epoch seconds (0 when the record does not say)

    @staticmethod
    def new(step: int, key: str, lease_token: int) -> LatestRecord:
        """A record written now."""
        return LatestRecord(step, key, lease_token, time.time())

    @classmethod
    def from_json(cls, body: bytes) -> LatestRecord:
        """ValueError naming what is wrong with a record this module did not write."""
        record = json_object(body)
        step, token = record.get("step"), record.get("lease_token", 0)
        if not (type(step) is int and step >= 0 and type(token) is int):
            raise ValueError(f"step {step!r} and lease token {token!r} are not whole numbers")
        key, written_at = record.get("key"), record.get("written_at")
        return cls(step, key if isinstance(key, str) else "", token,
                   float(written_at) if isinstance(written_at, int | float) else 0.0)

    def to_json(self) -> bytes:
        """The bytes `latest.json` holds, as S3's records have always had them (fields in this order)."""
        return json.dumps({"step": self.step, "key": self.key, "lease_token": self.lease_token,
                           "written_at": self.written_at}, indent=1).encode()
