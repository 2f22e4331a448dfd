"""The spending cap, kept from each training node: the job's spend is read from the ledger `status`
shows (every instance record in S3, at its market's price) every `check_seconds`, in a thread of its
own, since a job of many instances takes as many reads and the poll loop must keep answering notices.
The poll loop asks whether the job must stop now to stay within its budget: the spend as last read,
plus what the running instances have cost since and will cost until the next read could act and
while the command saves (costs/budget.py).

A spend it cannot read (S3 or the price history away) is said once, in the log and status.json's
warning, and read again at the next interval: training goes on rather than stopping on a guess."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...costs.budget import Spend, job_spend, reached
from ...costs.cost_text import usd
from ...costs.instance_records import read_records
from ...costs.spot_prices import SpotPriceSource
from ...storage.steps.remote import RemoteStore
from ..instance.config import AgentConfig
from ..records.telemetry import RunTelemetry


@dataclass
class BudgetWatch:
    budget_usd: float
    store: RemoteStore
    prices: SpotPriceSource
    stop_seconds: float  # how long a stop may take: the command's grace period
    warn: Callable[[str], None]  # the log, the events, status.json: called from the poll loop only
    check_seconds: float = 60.0
    clock: Callable[[], float] = time.time
    said: str = ""  # why the job stops, once it must
    _read: tuple[float, Spend] | None = None  # when the spend was last read, and what it was
    _problem: str = ""  # the last read's problem, to be said from the poll loop
    _warned: str = ""
    _stopped: threading.Event = field(default_factory=threading.Event)

    def read(self) -> None:
        """Read the job's spend now (a failure is kept as the problem to say, the last spend stands)."""
        now = self.clock()
        try:
            lives, unreadable = read_records(self.store)
            spend = job_spend(lives, self.prices, now=now)
        except Exception as error:  # S3 or the price history: read again at the next interval
            self._problem = f"the budget could not be checked: {error}"
            return
        self._read = (now, spend)
        problems = [*unreadable, *spend.unpriced]
        self._problem = f"the spend counted against the budget leaves out what has no price: {problems[0]}" \
            if problems else ""

    def start(self) -> BudgetWatch:
        def keep_reading() -> None:
            while not self._stopped.wait(self.check_seconds):
                self.read()

        threading.Thread(target=keep_reading, name="budget-watch", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def reason_to_stop(self) -> str | None:
        """Why the job stops here, or None (within its budget, or its spend not read yet)."""
        if self._problem and self._problem != self._warned:
            self._warned = self._problem
            self.warn(self._problem)
        if self._read is None:
            return None
        read_at, spend = self._read
        lead = max(0.0, self.clock() - read_at) + self.check_seconds + self.stop_seconds
        if not reached(spend, self.budget_usd, lead_seconds=lead):
            return None
        self.said = (f"the job's spend {usd(spend.usd)}, at {usd(spend.usd_per_hour)}/h until the next check and "
                     f"the stop, reaches its budget {usd(self.budget_usd)}")
        return self.said


def budget_watch_for(config: AgentConfig, store: RemoteStore, prices: SpotPriceSource | None,
                     telemetry: RunTelemetry) -> BudgetWatch | None:
    """The cap for this run with its spend read once, or None without a cap; without a price source it
    is not kept, and says so."""
    if not config.budget_usd:
        return None
    telemetry.update(budget_usd=config.budget_usd)
    if prices is None:
        telemetry.warn("the budget is not kept: this agent has no spot price source")
        return None
    watch = BudgetWatch(config.budget_usd, store, prices, stop_seconds=config.grace_seconds, warn=telemetry.warn,
                        check_seconds=config.budget_check_seconds)
    watch.read()
    return watch
