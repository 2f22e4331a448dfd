"""The job's records and events in S3: status.json, instance records, stop records and the
append-only event log (start, interruption, resume, done...) that the status, the cost and the report
are read from. A damaged record is named and taken as absent: the job goes on without it."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..record_kinds import EventKind
from . import job_keys as keys
from .job_objects import DamagedRecord, JobObjects

log = logging.getLogger(__name__)


class JobRecords(JobObjects):
    def read_record(self, name: str, *, absolute: bool = False) -> dict[str, Any] | None:
        """A record the job can go on without (its status, an event): a damaged one is named in one line
        and taken as absent. S3 failing after its retries still raises."""
        try:
            return self.get_json(name, absolute=absolute)
        except DamagedRecord as error:
            log.warning("%s: taken as absent", error)
            return None

    def append_event(self, kind: EventKind, **fields: Any) -> None:
        now = time.time()
        event = {"kind": kind, "time": keys.utc_stamp(now), "epoch": now, "instance": self.instance, **fields}
        self._put(keys.event_name(now, self.instance, kind), event, absolute=False)

    def events(self, *kinds: EventKind, since: float | None = None) -> list[dict[str, Any]]:
        """Every event of the job in time order; only those of `kinds`, recorded at or after `since`
        (epoch seconds), when given: chosen by key name, so only those are read."""
        paginator = self.s3.get_paginator("list_objects_v2")
        first = self.key(f"{keys.EVENTS}{keys.utc_stamp(since)}") if since is not None else ""
        endings = tuple(keys.event_kind_suffix(kind) for kind in kinds)
        names = [key for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key(keys.EVENTS))
                 for item in page.get("Contents", []) if (key := item["Key"]) >= first
                 and (not endings or key.endswith(endings))]
        found = (self.read_record(key, absolute=True) for key in sorted(names))
        return [event for event in found if event is not None]
