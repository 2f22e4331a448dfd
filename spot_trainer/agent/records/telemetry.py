"""What one agent reports while training: the command's output, progress, uploads, its own log lines.

Everything here is secondary to training: a failure to record goes to stderr and nothing else.
Lines go to the agent's own stdout/stderr (journald) and to the instance's CloudWatch Logs stream;
step events also update status.json and, at most once a second, the job's metrics.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ...storage.checkpoint_versions import is_version, step_text
from ...storage.record_kinds import EventKind
from ...storage.s3.job_records import JobRecords
from ...storage.steps.upload_health import UPLOADS_FAILING, UploadWarning
from ...storage.steps.uploader import Uploaded
from . import status as states
from .boot_events import BootClock
from .cloudwatch import CloudWatchSink
from .log_lines import agent_line, write_line
from .notify import Notifier
from .status import StatusReporter

METRIC_INTERVAL_SECONDS = 1.0
EVENT_START = '{"event"'  # how every progress line begins (progress.py)
PROGRESS_METRICS = (("Step", "step", "Count"), ("Loss", "loss", "None"),
                    ("SamplesPerSecond", "samples_per_s", "Count/Second"))


@dataclass
class RunTelemetry:
    store: JobRecords  # events, status.json
    cloud: CloudWatchSink | None
    reporter: StatusReporter | None = None  # set once the lease is held
    _last_metric: float = 0.0
    group_stop_step: int | None = None  # several nodes: the step at which the world last stopped to save
    notifier: Notifier | None = None  # the job's SNS topic, when the stack gives one
    last_upload_seconds: float | None = None  # this job's last measured checkpoint upload (the notice's budget)
    boot: BootClock = field(default_factory=BootClock.from_environment)  # the boot's phases, as events

    def log(self, line: str) -> None:
        agent_line(line)
        if self.cloud is not None:
            self.cloud.log(f"[agent] {line}")

    def update(self, **changes: Any) -> None:
        if self.reporter is not None:
            self.reporter.update(**changes)

    def warn(self, message: str) -> None:
        """Something the user must know or fix: said where they look (the log, the events and so a
        notification's record, status.json's warning), never silently."""
        self.log(f"WARNING: {message}")
        self.event(EventKind.WARNING, message=message)
        self.update(warning=message)

    def upload_warning(self, warning: UploadWarning) -> None:
        """Uploads keep failing, or work again: status.json's warning says so; a cause is recorded and
        notified once (UploadHealth decides which is the first)."""
        if not warning.message:
            if self.reporter is not None and self.reporter.status.warning.startswith(UPLOADS_FAILING):
                self.update(warning="")
                self.log(f"checkpoint uploads work again (step {warning.step})")
            return
        self.log(f"WARNING: {warning.message}")
        self.update(warning=warning.message)
        if warning.first_of_cause:
            self.event(EventKind.UPLOAD_FAILING, cause=warning.cause, step=warning.step, message=warning.message)

    def event(self, kind: EventKind, **fields: Any) -> None:
        fields = self.boot.timed(kind, fields)
        try:
            self.store.append_event(kind, **fields)
        except Exception as error:
            self.log(f"could not record event {kind}: {error}")
        if self.notifier is not None:
            self.notifier.event(kind, {"instance": self.store.instance, **fields})
        # A pause loses nothing: only a real interruption counts.
        if kind == EventKind.INTERRUPTION and not fields.get("paused") and self.cloud is not None:
            self.cloud.metric("Interruptions", 1, "Count")
        if kind == EventKind.START and (boot := self.boot.boot_fields()) is not None:
            self.event(EventKind.BOOT, **boot)

    def publish_status(self, record: dict[str, Any]) -> None:
        try:
            self.store.put_json(states.STATUS_NAME, record)
        except Exception as error:
            self.log(f"could not write status.json: {error}")

    def command_output(self, stream: str, line: str) -> None:
        at = line.find(EVENT_START) if stream == "stdout" else -1
        if at > 0:  # a progress bar on stdout (Lightning's tqdm) ends with no newline before an event line
            self._forward(stream, line[:at])
            line = line[at:]
        self._forward(stream, line)
        if stream != "stdout" or not line.startswith("{"):
            return
        try:
            event = json.loads(line)
        except ValueError:
            return
        if isinstance(event, dict) and event.get("event") == "step":
            self._progress(event)
        elif isinstance(event, dict) and event.get("event") == "group_stop" and isinstance(event.get("step"), int):
            self.group_stop_step = max(event["step"], self.group_stop_step or 0)
        elif isinstance(event, dict) and event.get("event") == EventKind.NOT_BIT_IDENTICAL:
            step = event.get("step") if isinstance(event.get("step"), int) else None  # a script's own line
            self.event(EventKind.NOT_BIT_IDENTICAL, step=step, reason=str(event.get("reason", ""))[:300])

    def _forward(self, stream: str, line: str) -> None:
        write_line(line, sys.stdout if stream == "stdout" else sys.stderr)
        if self.cloud is not None:
            self.cloud.log(line)

    def _progress(self, event: dict[str, Any]) -> None:
        self.update(step=event.get("step"), loss=event.get("loss"), samples_per_s=event.get("samples_per_s"))
        if (first := self.boot.first_step(event.get("step"))) is not None:
            self.event(EventKind.FIRST_STEP, **first)
        now = time.monotonic()
        if self.cloud is None or now - self._last_metric < METRIC_INTERVAL_SECONDS:
            return
        self._last_metric = now
        for name, key, unit in PROGRESS_METRICS:
            if isinstance(event.get(key), (int, float)):
                self.cloud.metric(name, event[key], unit)

    def uploaded(self, done: Uploaded) -> None:
        self.last_upload_seconds = done.seconds
        self.event(EventKind.CHECKPOINT, step=done.step, upload_seconds=round(done.seconds, 3), bytes=done.bytes,
                   published=done.published, **({"part": True} if done.part else {}))
        if done.published:
            self.update(checkpoint_step=done.step)
            # A command that prints no JSON progress: checkpoints tell, where they state their step.
            if self.reporter is not None and not is_version(done.step) and (self.reporter.status.step or 0) < done.step:
                self.update(step=done.step)
        if self.cloud is not None:
            self.cloud.metric("CheckpointUploadSeconds", done.seconds, "Seconds")
            if done.published:  # progress for the stall alarm, also from a command that prints no steps
                self.cloud.metric("Step", done.step, "Count")
        if done.published:
            self.log(f"checkpoint {step_text(done.step)} uploaded in {done.seconds:.2f}s ({done.bytes} bytes)")
        elif done.part:
            self.log(f"checkpoint step {done.step}: this node's shards uploaded in {done.seconds:.2f}s ({done.bytes} "
                     "bytes); the step counts once every node's shards are in S3")
        else:  # never quietly: a newer step in S3 outranks this one, and a restart resumes from that
            self.log(f"checkpoint step {done.step} was not published: S3's latest.json "
                     f"already names a newer step or lease holder; this step stays on this disk only")
