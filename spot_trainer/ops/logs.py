"""`logs`: the job's log group, every instance's stream in time order, and with `follow` what comes next.

FilterLogEvents reads all streams of a group at once, interleaved by time
(https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_FilterLogEvents.html).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .aws_access import aws_errors
from .problem import JobProblem

FOLLOW_SECONDS = 2.0


def log_line(event: dict[str, Any]) -> str:
    """`2026-11-27T05:40:01 i-0abc  message`: when, which instance, what."""
    when = datetime.fromtimestamp(int(event["timestamp"]) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{when} {event.get('logStreamName', '')}  {str(event['message']).rstrip()}"


def read_logs(logs: Any, group: str, since_ms: int, seen: set[str]) -> list[dict[str, Any]]:
    """Events at or after `since_ms` not yet in `seen` (ids), in time order."""
    events: list[dict[str, Any]] = []
    with aws_errors(f"cannot read log group {group}"):
        try:
            for page in logs.get_paginator("filter_log_events").paginate(logGroupName=group, startTime=since_ms):
                events += [e for e in page.get("events", []) if e["eventId"] not in seen]
        except logs.exceptions.ResourceNotFoundException as error:
            raise JobProblem(f"no log group {group}: the job's stack is gone and its logs with it") from error
    seen.update(e["eventId"] for e in events)
    return sorted(events, key=lambda e: (e["timestamp"], e["eventId"]))


def print_logs(logs: Any, group: str, *, since_ms: int, follow: bool, emit: Callable[[str], None],
               keep_going: Callable[[], bool] = lambda: True) -> int:
    """Print what the group holds, then with `follow` poll until interrupted; the number of lines."""
    seen: set[str] = set()
    printed = 0
    while True:
        for event in read_logs(logs, group, since_ms, seen):
            emit(log_line(event))
            since_ms = max(since_ms, int(event["timestamp"]))
            printed += 1
        if not follow or not keep_going():
            return printed
        time.sleep(FOLLOW_SECONDS)
