"""This instance's record in the job (`<job>/instances/<id>.json`): what it is and how long it has run.

The job's cost is computed from these records (spot_trainer/costs), so every agent keeps its own fresh:
type, AZ and market from IMDS, launched_at (boot), last_seen each heartbeat, stopped_at on a clean
stop, and the training step and newest checkpoint on this disk it last saw. A power-off leaves last_seen
as the best bound, and those steps as what the lost instance is known to have computed. Between
heartbeats it also measures this instance's spend for the SpendUSD metric. Recording is secondary to
training: a failure is logged, never raised.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...costs.instance_records import DISK_CHECKPOINT
from ...costs.spend_meter import SpendMeter
from ...costs.spot_prices import Ec2SpotPrices, SpotPriceSource, TracePrices
from ...storage.s3.job_keys import instance_record
from ...storage.s3.job_records import JobRecords
from ..instance.imds import ImdsClient
from .log_lines import agent_line


@dataclass(frozen=True)
class InstanceFacts:
    instance: str
    instance_type: str
    az: str
    market: str  # "spot" | "on-demand"
    launched_at: float


def instance_facts(imds: ImdsClient, env: Mapping[str, str] = os.environ, *,
                   uptime_file: Path = Path("/proc/uptime"), clock: Callable[[], float] = time.time) -> InstanceFacts:
    """From IMDS; launched_at from SPOT_LAUNCHED_AT (epoch seconds) or the boot time (now − uptime).
    Raises ImdsError or ValueError with one line."""
    return InstanceFacts(instance=imds.instance_id(), instance_type=imds.instance_type(),
                         az=imds.availability_zone(), market=imds.market(),
                         launched_at=launched_at(env.get("SPOT_LAUNCHED_AT", ""), uptime_file, clock))


def launched_at(setting: str, uptime_file: Path, clock: Callable[[], float]) -> float:
    if setting.strip():
        try:
            return float(setting)
        except ValueError:
            raise ValueError(f"SPOT_LAUNCHED_AT={setting!r} is not epoch seconds") from None
    try:
        uptime = float(uptime_file.read_text().split()[0])
    except (OSError, ValueError, IndexError) as error:
        raise ValueError(f"cannot read the boot time from {uptime_file}: {error}") from None
    return clock() - uptime


def price_source(ec2: Any, trace: str = "") -> SpotPriceSource:
    """EC2's price history, or a trace file (SPOT_PRICE_TRACE, for the local cloud)."""
    return TracePrices.from_file(Path(trace)) if trace else Ec2SpotPrices(ec2)


class InstanceRecord:
    """Writes the record at once and every heartbeat from a daemon thread; `stop` writes stopped_at.

    on_spend: called with this instance's cost (USD) since the previous beat, at its market's price
    (the SpendUSD metric). step: the training step this instance last saw, and checkpoint: the newest
    complete checkpoint on its disk (uploaded or not), kept in the record so the work redone after a
    power-off can be counted.
    """

    def __init__(self, store: JobRecords, facts: InstanceFacts, clock: Callable[[], float] = time.time, *,
                 meter: SpendMeter | None = None, on_spend: Callable[[float], None] | None = None,
                 step: Callable[[], int | None] | None = None, checkpoint: Callable[[], int | None] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.store, self.facts, self.clock = store, facts, clock
        self.meter, self.on_spend, self.step, self.checkpoint = meter, on_spend, step, checkpoint
        self.log = log or agent_line
        self.heartbeat_seconds = 60.0
        self._lock = threading.Lock()  # a late heartbeat must never overwrite stopped_at
        self._spend_lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._spent_until = facts.launched_at
        self._failed = False
        self._wrote = False  # a record of this agent is in S3: what the store holds is no predecessor's

    @property
    def name(self) -> str:
        return instance_record(self.facts.instance)

    def start(self, heartbeat_seconds: float) -> InstanceRecord:
        if not heartbeat_seconds > 0:
            raise ValueError(f"heartbeat_seconds must be positive, got {heartbeat_seconds}")
        self.heartbeat_seconds = heartbeat_seconds
        self._thread = threading.Thread(target=self._run, name="instance-record", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Write stopped_at (once); later heartbeats never overwrite it."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
            now = self._write(stopping=True)
        self._report_spend(now)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def beat(self) -> None:
        with self._lock:
            if self._stopped.is_set():
                return
            now = self._write(stopping=False)
        self._report_spend(now)

    def record(self, now: float, stopped_at: float | None) -> dict[str, Any]:
        facts = self.facts
        record: dict[str, Any] = {
            "instance": facts.instance, "type": facts.instance_type, "az": facts.az, "market": facts.market,
            "launched_at": facts.launched_at, "last_seen": now, "stopped_at": stopped_at,
            "heartbeat_seconds": self.heartbeat_seconds,
        }
        for name, read in (("step", self.step), (DISK_CHECKPOINT, self.checkpoint)):
            if (value := _read_step(read)) is not None:
                record[name] = value
        return record

    def _run(self) -> None:
        self._carry_over()
        self.beat()
        while not self._stopped.wait(self.heartbeat_seconds):
            self.beat()

    def _carry_over(self) -> None:
        """An agent restarted on this instance measures spend from where its predecessor's record ends.
        Under the write lock, before this agent's first write or not at all: a stop right after the start
        must not read this agent's own record as a predecessor's (and meter nothing)."""
        with self._lock:
            if self._wrote:
                return
            try:
                previous = self.store.get_json(self.name)
            except Exception:
                return
            launched = previous.get("launched_at") if previous else None
            # The same boot (now − uptime moves by milliseconds between readings), not an earlier life.
            if previous and isinstance(launched, int | float) and abs(launched - self.facts.launched_at) < 5:
                ends = [v for v in (previous.get("last_seen"), previous.get("stopped_at"))
                        if isinstance(v, int | float)]
                with self._spend_lock:
                    self._spent_until = max([self._spent_until, *ends])

    def _write(self, *, stopping: bool) -> float:
        now = self.clock()
        try:
            self.store.put_json(self.name, self.record(now, now if stopping else None))
            self._wrote = True
            if self._failed:
                self.log(f"instance record {self.name} written again")
            self._failed = False
        except Exception as error:  # S3 away for a while: the next beat tries again
            if not self._failed:
                self.log(f"could not write the instance record {self.name}: {error}")
            self._failed = True
        return now

    def _report_spend(self, now: float) -> None:
        if self.meter is None or self.on_spend is None:
            return
        with self._spend_lock:
            since, self._spent_until = self._spent_until, max(self._spent_until, now)
        try:
            spent = self.meter.spend(since, now)
            if spent is not None:
                self.on_spend(spent)
        except Exception as error:  # an unreadable price: this beat's spend is unknown, not guessed
            self.log(f"spend since the last heartbeat not measured: {error}")


def _read_step(read: Callable[[], int | None] | None) -> int | None:
    """A step the agent holds, or None: the record is written whatever that read does."""
    if read is None:
        return None
    try:
        return read()
    except Exception:
        return None
