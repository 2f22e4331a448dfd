"""A job's cost from its instance records, its events and a spot price source.

Per instance: the hours it is billed (instance_records.billed_span), what they cost at its market's
price (spot: the integral of its type's and AZ's price history over them; on-demand: the table), and
what the same hours would cost on demand. For the job:

    cost                 = Σ spot instances' spot cost + Σ on-demand instances' table cost
    on-demand, same hours = Σ every instance's hours × its type's on-demand price
    savings              = on-demand same hours − cost   (and ÷ on-demand same hours)
    redone work cost     = redone steps × cost ÷ steps computed
    losses               = every instance lost to a notice or a power-off (lost_instances.py)

The savings compare the hours actually run, so they are the spot discount as the job got it; an
uninterrupted on-demand run would need fewer hours (no replacement boots, no redone steps), and
that difference is what the redone work and the boots cost. Figures an unknown price would make up
are left out of the sums and named in `problems`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..storage.checkpoint_versions import is_version
from ..storage.record_kinds import FINISHED
from ..storage.steps.remote import RemoteStore
from .instance_records import InstanceLife, billed_span, read_records
from .lost_instances import Losses, find_losses
from .on_demand_prices import AS_OF, SOURCE, on_demand_price
from .price_integral import cost_over, covers
from .price_pools import PooledPrices
from .redone_work import training_stretches, work_done
from .spot_prices import PriceError, SpotPriceSource


@dataclass(frozen=True)
class InstanceCost:
    instance: str
    instance_type: str
    az: str
    market: str
    start: float
    end: float
    ended_by: str  # "stopped", "last seen", "running"
    hours: float
    cost_usd: float | None  # at its own market's price; None: the price is unknown
    on_demand_usd: float | None  # the same hours on demand; None: the type is not in the table


@dataclass(frozen=True)
class JobCost:
    instances: list[InstanceCost]
    instance_hours: float
    spot_hours: float
    on_demand_hours: float
    spot_cost_usd: float
    on_demand_instances_usd: float
    cost_usd: float
    on_demand_same_hours_usd: float
    savings_usd: float
    savings_fraction: float | None  # None: nothing priced on demand to compare with
    steps_computed: int
    redone_steps: int
    redone_cost_usd: float | None  # None: no step was seen
    price_source: str
    on_demand_source: str
    unpriced: list[str] = field(default_factory=list)  # instances left out of the sums: no price known
    problems: list[str] = field(default_factory=list)
    losses: Losses = field(default_factory=lambda: Losses([], 0, 0))  # the instances lost, and how
    steps_unknown: bool = False  # the job's checkpoints state no step (they go by version): no step count

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def job_cost(lives: Sequence[InstanceLife], events: Iterable[Mapping[str, Any]], prices: SpotPriceSource, *,
             now: float, job_running: bool, minimum_seconds: float = 60.0) -> JobCost:
    problems: list[str] = []
    spans = {life.instance: billed_span(life, now=now, job_running=job_running, minimum_seconds=minimum_seconds)
             for life in lives}
    prices = PooledPrices(prices, [((life.instance_type, life.az), spans[life.instance].start,
                                    spans[life.instance].end) for life in lives if life.market == "spot"])
    costs = [instance_cost(life, prices, now=now, job_running=job_running, minimum_seconds=minimum_seconds,
                           problems=problems) for life in lives]
    events = list(events)
    # An instance reached at least the newest checkpoint on its disk, published or not.
    work = work_done(training_stretches(events, [replace(life, step=life.reached_step) for life in lives]))
    spot = sum(c.cost_usd or 0.0 for c in costs if c.market == "spot")
    on_demand = sum(c.cost_usd or 0.0 for c in costs if c.market == "on-demand")
    # Savings compare like with like: only instances priced both ways.
    compared = [c for c in costs if c.cost_usd is not None and c.on_demand_usd is not None]
    baseline = sum(c.on_demand_usd or 0.0 for c in compared)
    saved = baseline - sum(c.cost_usd or 0.0 for c in compared)
    total = spot + on_demand
    return JobCost(
        instances=costs,
        instance_hours=sum(c.hours for c in costs),
        spot_hours=sum(c.hours for c in costs if c.market == "spot"),
        on_demand_hours=sum(c.hours for c in costs if c.market == "on-demand"),
        spot_cost_usd=spot,
        on_demand_instances_usd=on_demand,
        cost_usd=total,
        on_demand_same_hours_usd=sum(c.on_demand_usd or 0.0 for c in costs),
        savings_usd=saved,
        savings_fraction=saved / baseline if baseline else None,
        steps_computed=work.computed,
        redone_steps=work.redone,
        redone_cost_usd=work.redone * total / work.computed if work.computed else None,
        price_source=prices.description,
        on_demand_source=f"on-demand table of {AS_OF}: {SOURCE}",
        unpriced=[c.instance for c in costs if c.cost_usd is None],
        problems=list(dict.fromkeys(problems)),  # one cause, one line, however many instances it hit
        losses=find_losses(events, lives, now=now, job_running=job_running),
        steps_unknown=any(is_version(event.get("step")) for event in events),
    )




def stored_job_cost(store: RemoteStore, events: Iterable[Mapping[str, Any]], state: str | None,
                    prices: SpotPriceSource, *, now: float, minimum_seconds: float = 60.0,
                    elsewhere: Sequence[RemoteStore] = ()) -> JobCost:
    """The cost of a job from its records in S3; `state` is status.json's (instances of a job that
    still runs are counted to now); `elsewhere`: a job of several regions, its stores in the others."""
    read = [read_records(each) for each in (store, *elsewhere)]
    lives = [life for found, _ in read for life in found]
    unreadable = [problem for _, problems in read for problem in problems]
    cost = job_cost(lives, events, prices, now=now, job_running=state is not None and state not in FINISHED,
                    minimum_seconds=minimum_seconds)
    return replace(cost, problems=unreadable + cost.problems)


def instance_cost(life: InstanceLife, prices: SpotPriceSource, *, now: float, job_running: bool,
                  minimum_seconds: float, problems: list[str]) -> InstanceCost:
    """One instance's billed hours and their cost; what cannot be priced is added to `problems`."""
    span = billed_span(life, now=now, job_running=job_running, minimum_seconds=minimum_seconds)
    hours = (span.end - span.start) / 3600
    table = on_demand_price(life.instance_type)
    if table is None:
        problems.append(f"{life.instance}: no on-demand price for {life.instance_type} in the table (of {AS_OF})")
    cost = table * hours if table is not None else None
    if life.market == "spot":
        cost = spot_cost(life, prices, span.start, span.end, problems)
    return InstanceCost(life.instance, life.instance_type, life.az, life.market, span.start, span.end,
                        span.ended_by, hours, cost, table * hours if table is not None else None)


def spot_cost(life: InstanceLife, prices: SpotPriceSource, start: float, end: float,
              problems: list[str]) -> float | None:
    try:
        points = prices.history(life.instance_type, life.az, start, end)
    except PriceError as error:
        problems.append(str(error))
        return None
    if not points:
        problems.append(f"{life.instance}: no spot price for {life.instance_type} in {life.az} ({prices.description})")
        return None
    if not covers(points, start):
        problems.append(f"{life.instance}: the spot price history of {life.instance_type} in {life.az} begins after "
                        "the instance launched; its first price is used for the time before")
    return cost_over(points, start, end)
