"""The agents' events as the player reads them while the run goes on: the job's event records in
(moto's) S3, each read once.

Why these and not the agents' log lines: the events are the agent's own structured record (what
`status` and the cost report read too), their fields do not change when a line is reworded for
people, and each carries the moment it happened, where a journal line is only stamped when the
player reads it. One LIST per tick, and a GET per event not seen yet: an event's key starts with the
time its agent stamped it, and an agent's PUT can land after a later-stamped one of another agent, so
each LIST starts a generous LATE_SECONDS before the newest event seen rather than just after it (a
PUT lands in milliseconds, or seconds with retries): a long run is not listed whole four times a second.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from spot_trainer.storage.s3.job_keys import EVENTS, job_key, utc_stamp

LATE_SECONDS = 60.0  # how long after its stamp an event's PUT may still land


@dataclass
class EventFeed:
    s3: Any  # boto3 "s3"
    bucket: str
    job: str
    _seen: set[str] = field(default_factory=set)
    _newest: float | None = None  # the newest event's stamp seen so far

    def new_events(self) -> dict[str, list[dict[str, Any]]]:
        """The events recorded since the last call, by the instance that recorded them, in time order."""
        by_instance: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for key in sorted(set(self._keys()) - self._seen):
            event = self._read(key)
            if event is None:
                continue  # not readable yet: tried again next time
            self._seen.add(key)
            if isinstance(event.get("epoch"), (int, float)) and isinstance(event.get("instance"), str):
                by_instance[event["instance"]].append(event)
                self._newest = max(self._newest or 0.0, float(event["epoch"]))
        for events in by_instance.values():
            events.sort(key=lambda event: float(event["epoch"]))
        return dict(by_instance)

    def _keys(self) -> list[str]:
        start = {} if self._newest is None else \
            {"StartAfter": job_key(self.job, EVENTS + utc_stamp(self._newest - LATE_SECONDS))}
        try:
            pages = self.s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=job_key(self.job, EVENTS), **start)
            return [item["Key"] for page in pages for item in page.get("Contents", [])]
        except Exception:  # moto busy for a moment: the next tick lists again
            return []

    def _read(self, key: str) -> dict[str, Any] | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception:
            return None
        try:
            record = json.loads(body)
        except ValueError:
            return {}  # not an event of ours: never read again
        return record if isinstance(record, dict) else {}
