"""The spending cap, kept from a training node: at most every `check_seconds` it reads the job's
spend from the ledger `status` shows (every instance record in S3, at its market's price) and says
when the job must stop to stay within its budget: the spend, plus what the running instances cost
until the next check could act and while the command saves (costs/budget.py).

A spend it cannot read (S3 or the price history away) is said once, in the log and status.json's
warning, and checked again at the next interval: training goes on rather than stopping on a guess."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..costs.budget import Spend, job_spend, reached
from ..costs.cost_text import usd
from ..costs.instance_records import read_records
from ..costs.spot_prices import SpotPriceSource
from ..storage.remote import RemoteStore
from .config import AgentConfig
from .telemetry import RunTelemetry

BUDGET_EVENT = "budget"  # the event (and notification) of a job stopped at its cap


@dataclass
class BudgetWatch:
    budget_usd: float
    store: RemoteStore
    prices: SpotPriceSource
    stop_seconds: float  # how long a stop may take: the command's grace period
    warn: Callable[[str], None]  # said once per kind of problem: the log, the events, status.json
    check_seconds: float = 60.0
    clock: Callable[[], float] = time.time
    spend: Spend | None = None  # as last read
    said: str = ""  # why the job stops, once it must
    _next_check: float = float("-inf")
    _warned: str = ""

    def reason_to_stop(self, *, now_or_never: bool = False) -> str | None:
        """Why the job stops here (None: within its budget, or not checked yet this interval)."""
        now = self.clock()
        if not now_or_never and now < self._next_check:
            return None
        self._next_check = now + self.check_seconds
        try:
            lives, unreadable = read_records(self.store)
            spend = job_spend(lives, self.prices, now=now)
        except Exception as error:  # S3 or the price history: checked again at the next interval
            self._say(f"the budget could not be checked: {error}")
            return None
        self.spend = spend
        if problems := [*unreadable, *spend.unpriced]:
            self._say(f"the spend counted against the budget leaves out what has no price: {problems[0]}")
        if not reached(spend, self.budget_usd, lead_seconds=self.check_seconds + self.stop_seconds):
            return None
        self.said = (f"the job's spend {usd(spend.usd)}, at {usd(spend.usd_per_hour)}/h until the next check and "
                     f"the stop, reaches its budget {usd(self.budget_usd)}")
        return self.said

    def _say(self, message: str) -> None:
        if message != self._warned:
            self._warned = message
            self.warn(message)


def budget_watch_for(config: AgentConfig, store: RemoteStore, prices: SpotPriceSource | None,
                     telemetry: RunTelemetry) -> BudgetWatch | None:
    """The cap for this run, or None without one; without a price source it is not kept, and says so."""
    if not config.budget_usd:
        return None
    telemetry.update(budget_usd=config.budget_usd)

    def warn(message: str) -> None:
        telemetry.log(f"WARNING: {message}")
        telemetry.event("warning", message=message)
        telemetry.update(warning=message)

    if prices is None:
        warn("the budget is not kept: this agent has no spot price source")
        return None
    return BudgetWatch(config.budget_usd, store, prices, stop_seconds=config.grace_seconds, warn=warn,
                       check_seconds=config.budget_check_seconds)
