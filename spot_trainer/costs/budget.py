"""A job's spending cap: its spend from the ledger `status` shows, what it costs per hour now, and what
finishing would cost at the current pace.

The spend is the job's cost (job_cost.py: every instance record, at its market's price, instances
still running counted to now). The hourly rate is what the running instances cost now (the spot
price in effect in their AZ, or the on-demand table), so a check can stop before the cap rather than
after it: between two checks and during the stop the instances go on costing that rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .instance_records import InstanceLife
from .job_cost import InstanceCost, JobCost, job_cost
from .on_demand_prices import on_demand_price
from .spot_prices import PriceError, SpotPriceSource


@dataclass(frozen=True)
class Spend:
    usd: float  # the job's cost so far (instances that cannot be priced left out: see `unpriced`)
    usd_per_hour: float  # what its running instances cost now
    unpriced: tuple[str, ...] = ()  # why part of the spend is unknown, one line each


def job_spend(lives: Sequence[InstanceLife], prices: SpotPriceSource, *, now: float) -> Spend:
    """The spend of a running job from its instance records."""
    cost = job_cost(lives, [], prices, now=now, job_running=True)
    problems = list(cost.problems) if cost.unpriced else []
    return Spend(cost.cost_usd, hourly_rate(cost, prices, now=now, problems=problems), tuple(problems))


def hourly_rate(cost: JobCost, prices: SpotPriceSource, *, now: float, problems: list[str]) -> float:
    """USD per hour of the job's fleet at today's prices: the instances still running, or (none running)
    those that ran last, ended within LAST_FLEET_SECONDS of the last to stop."""
    rate = 0.0
    for instance in fleet(cost.instances):
        price = price_now(instance.instance_type, instance.az, instance.market, prices, now)
        if price is None:
            problems.append(f"{instance.instance}: no price now for {instance.instance_type} in {instance.az}")
            continue
        rate += price
    return rate


LAST_FLEET_SECONDS = 300.0


def fleet(instances: Sequence[InstanceCost]) -> list[InstanceCost]:
    running = [instance for instance in instances if instance.ended_by == "running"]
    if running or not instances:
        return running
    last = max(instance.end for instance in instances)
    return [instance for instance in instances if last - instance.end <= LAST_FLEET_SECONDS]


def price_now(instance_type: str, az: str, market: str, prices: SpotPriceSource, now: float) -> float | None:
    if market != "spot":
        return on_demand_price(instance_type)
    try:
        points = prices.history(instance_type, az, now, now)
    except PriceError:
        return None
    return points[-1].price if points else None


def reached(spend: Spend, budget_usd: float, *, lead_seconds: float) -> bool:
    """Whether the job must stop now to stay within `budget_usd`: its spend, plus what the running
    instances cost over `lead_seconds` (until the next check could act, and the stop itself)."""
    return spend.usd + spend.usd_per_hour * lead_seconds / 3600 >= budget_usd


def cost_to_finish(remaining_steps: int, seconds_per_step: float, usd_per_hour: float) -> float:
    """What the steps left cost at the current pace and hourly rate (boots and interruptions not
    counted: a floor, not a promise)."""
    return max(0, remaining_steps) * seconds_per_step / 3600 * usd_per_hour


@dataclass(frozen=True)
class Outlook:
    """The budget and the cost to finish beside the spend, as `status` shows them."""

    spent_usd: float
    budget_usd: float | None  # None: no cap
    usd_per_hour: float  # the fleet at today's prices
    remaining_steps: int | None  # None: the job's size or its step is unknown
    seconds_per_step: float | None  # None: no pace measured yet
    to_finish_usd: float | None  # None: one of the above is unknown, or no fleet to price

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def outlook(status: Mapping[str, Any], cost: JobCost, prices: SpotPriceSource, *, now: float) -> Outlook:
    """From status.json (its budget, step, job size and pace) and the job's cost."""
    budget, total, pace = (_number(status.get(name)) for name in ("budget_usd", "total_steps", "seconds_per_step"))
    step = _number(status.get("step")) or 0.0
    remaining = int(total - step) if total is not None else None
    rate = hourly_rate(cost, prices, now=now, problems=[])
    to_finish = None
    if remaining is not None and pace is not None and fleet(cost.instances):
        to_finish = cost_to_finish(remaining, pace, rate)
    return Outlook(cost.cost_usd, budget if budget else None, rate, remaining, pace, to_finish)


def _number(value: Any) -> float | None:
    """A finite number from a record, else None (a damaged or missing field)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
