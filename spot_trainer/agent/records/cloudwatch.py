"""CloudWatch Logs (one stream per instance) and training metrics, strictly best-effort.

Training must never stop because logging failed: every AWS call here is wrapped, failures are
counted and reported once on stderr, and a background thread does the sending so a slow or
unreachable endpoint never holds up the agent's poll loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..instance.aws_clients import LogsClient, MetricsClient
from .log_lines import agent_line

MAX_BATCH_EVENTS = 1000  # well under PutLogEvents' 10,000 events / 1 MiB per call
MAX_EVENT_CHARS = 16_000  # keeps one event far below the 256 KiB limit


@dataclass
class CloudWatchSink:
    """Buffers log lines and metric points; `flush` (or the background thread) sends them."""

    logs: LogsClient | None  # None skips logs
    metrics: MetricsClient | None  # None skips metrics
    log_group: str
    log_stream: str
    namespace: str
    job: str
    interval_seconds: float = 2.0
    failures: int = 0
    _lines: list[dict[str, Any]] = field(default_factory=list)
    _points: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stream_ready: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _warned: bool = False

    def log(self, line: str) -> None:
        with self._lock:
            # CloudWatch rejects empty messages; a blank line becomes one space
            message = line[:MAX_EVENT_CHARS] or " "
            self._lines.append({"timestamp": int(time.time() * 1000), "message": message})

    def metric(self, name: str, value: float, unit: str = "None") -> None:
        with self._lock:
            self._points.append(
                {
                    "MetricName": name,
                    "Value": float(value),
                    "Unit": unit,
                    "Timestamp": time.time(),
                    "Dimensions": [{"Name": "Job", "Value": self.job}],
                }
            )

    def start(self) -> CloudWatchSink:
        self._thread = threading.Thread(target=self._run, name="cloudwatch", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop the background thread and send what is left (bounded by `timeout`)."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=timeout)
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            self.flush()

    def flush(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
            points, self._points = self._points, []
        logs, metrics = self.logs, self.metrics
        if lines and logs is not None:
            self._best_effort("logs", lambda: self._send_lines(logs, lines))
        if points and metrics is not None:
            self._best_effort("metrics", lambda: self._send_points(metrics, points))

    def _send_lines(self, logs: LogsClient, lines: list[dict[str, Any]]) -> None:
        if not self._stream_ready:
            self._ensure_stream(logs)
        for start in range(0, len(lines), MAX_BATCH_EVENTS):
            logs.put_log_events(
                logGroupName=self.log_group,
                logStreamName=self.log_stream,
                logEvents=lines[start : start + MAX_BATCH_EVENTS],
            )

    def _ensure_stream(self, logs: LogsClient) -> None:
        # The stack creates the group before the first instance (and its role may not create groups).
        exists = logs.exceptions.ResourceAlreadyExistsException
        try:
            logs.create_log_stream(logGroupName=self.log_group, logStreamName=self.log_stream)
        except exists:
            pass
        self._stream_ready = True

    def _send_points(self, metrics: MetricsClient, points: list[dict[str, Any]]) -> None:
        for start in range(0, len(points), 500):  # PutMetricData accepts up to 1000 per call
            metrics.put_metric_data(Namespace=self.namespace, MetricData=points[start : start + 500])

    def _best_effort(self, what: str, send: Callable[[], None]) -> None:
        try:
            send()
        except Exception as error:  # never let telemetry take training down
            self.failures += 1
            if not self._warned:
                self._warned = True
                agent_line(f"sending {what} to CloudWatch failed ({error}); training goes on")
