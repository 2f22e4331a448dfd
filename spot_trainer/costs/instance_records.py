"""The instance records of a job (`<job>/instances/<id>.json`) and how long each instance is billed.

Every agent keeps its own record fresh: type, AZ and market from IMDS, launched_at (boot), last_seen
(each heartbeat), stopped_at (a clean stop), and the training step and newest checkpoint on its disk it last
saw. An instance that lost power never writes stopped_at:
it is billed to the last heartbeat it wrote, which undercounts by at most one heartbeat.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..storage.s3.job_keys import INSTANCES
from ..storage.steps.remote import RemoteStore, RemoteStoreError

PREFIX = INSTANCES
DEFAULT_HEARTBEAT_SECONDS = 60.0
MARKETS = ("spot", "on-demand")
LAST_SEEN = "last seen"  # BilledSpan.ended_by of an instance that never stopped cleanly and beats no more
DISK_CHECKPOINT = "disk_checkpoint_step"  # the record's field for the newest checkpoint on the instance's disk


class RecordError(ValueError):
    """A record is not one an agent writes; the message names the field."""


@dataclass(frozen=True)
class InstanceLife:
    instance: str
    instance_type: str
    az: str
    market: str  # "spot" | "on-demand"
    launched_at: float
    last_seen: float
    stopped_at: float | None
    step: int | None = None  # the training step this instance last saw, when it trained
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    # The newest complete checkpoint on its disk (uploaded or not): a step it surely reached, even when a
    # command that prints no progress lost power before that checkpoint was published.
    disk_checkpoint_step: int | None = None

    @property
    def reached_step(self) -> int | None:
        """The highest step this instance is known to have reached, as of its last heartbeat."""
        known = [s for s in (self.step, self.disk_checkpoint_step) if s is not None]
        return max(known, default=None)


@dataclass(frozen=True)
class BilledSpan:
    start: float
    end: float
    ended_by: str  # "stopped", "last seen" (no clean stop: a power-off or a lost agent), "running"


def parse_record(record: Mapping[str, Any]) -> InstanceLife:
    """An instance record as an agent writes it; RecordError names the first field that is not."""
    market = _text(record, "market")
    if market not in MARKETS:
        raise RecordError(f"market: expected 'spot' or 'on-demand', got {market!r}")
    step, beat, on_disk = record.get("step"), record.get("heartbeat_seconds"), record.get(DISK_CHECKPOINT)
    return InstanceLife(
        instance=_text(record, "instance"), instance_type=_text(record, "type"), az=_text(record, "az"),
        market=market, launched_at=_epoch(record, "launched_at"), last_seen=_epoch(record, "last_seen"),
        stopped_at=None if record.get("stopped_at") is None else _epoch(record, "stopped_at"),
        step=_whole(step),
        heartbeat_seconds=float(beat) if isinstance(beat, int | float) and beat > 0 else DEFAULT_HEARTBEAT_SECONDS,
        disk_checkpoint_step=_whole(on_disk),
    )


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(record: Mapping[str, Any], name: str) -> str:
    value = record.get(name)
    if not isinstance(value, str) or not value:
        raise RecordError(f"{name}: expected a non-empty string, got {value!r}")
    return value


def _epoch(record: Mapping[str, Any], name: str) -> float:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RecordError(f"{name}: expected epoch seconds, got {value!r}")
    return float(value)


def read_records(store: RemoteStore) -> tuple[list[InstanceLife], list[str]]:
    """Every instance record of the job, and one line per record that could not be used."""
    paginator = store.s3.get_paginator("list_objects_v2")
    keys = sorted(item["Key"] for page in paginator.paginate(Bucket=store.bucket, Prefix=store.key(PREFIX))
                  for item in page.get("Contents", []) if item["Key"].endswith(".json"))
    lives: list[InstanceLife] = []
    problems: list[str] = []
    for key in keys:
        try:
            record = store.get_json(key, absolute=True)
            if record is not None:
                lives.append(parse_record(record))
        except (RecordError, RemoteStoreError) as error:
            problems.append(f"s3://{store.bucket}/{key}: {error}")
    return lives, problems


def billed_span(life: InstanceLife, *, now: float, job_running: bool, minimum_seconds: float = 60.0) -> BilledSpan:
    """launched_at → stopped_at; without a stop, → now while the job runs and the instance still beats
    (three heartbeats of grace), else → last_seen. EC2 bills Linux per second, at least `minimum_seconds`."""
    if life.stopped_at is not None:
        end, ended_by = life.stopped_at, "stopped"
    elif job_running and now - life.last_seen <= 3 * life.heartbeat_seconds:
        end, ended_by = now, "running"
    else:
        end, ended_by = life.last_seen, LAST_SEEN
    return BilledSpan(life.launched_at, max(end, life.launched_at + minimum_seconds), ended_by)
