"""A job's cost in words, in the status command's two-column layout."""

from __future__ import annotations

from .job_cost import JobCost


def describe_cost(cost: JobCost) -> list[str]:
    if not cost.instances:
        return ["cost           no instance records yet (agents write them once they start)", *_notes(cost)]
    running = sum(1 for c in cost.instances if c.ended_by == "running")
    lines = [
        f"instance-hours {cost.instance_hours:.2f} on {len(cost.instances)} instances "
        f"({cost.spot_hours:.2f} spot, {cost.on_demand_hours:.2f} on-demand"
        + (f"; {running} still running, counted to now)" if running else ")"),
        f"cost           {usd(cost.cost_usd)} (spot {usd(cost.spot_cost_usd)}, "
        f"on-demand instances {usd(cost.on_demand_instances_usd)})" + _unpriced(cost),
        f"on-demand      {usd(cost.on_demand_same_hours_usd)} for the same hours at on-demand prices",
        f"savings        {saved(cost)}",
        f"redone work    {redone(cost)}",
        f"prices         spot: {cost.price_source}; {cost.on_demand_source}",
    ]
    return lines + _notes(cost)


def saved(cost: JobCost) -> str:
    if cost.savings_fraction is None:
        return "not known (no instance priced both ways)"
    scope = " (priced instances only)" if cost.unpriced else ""
    if cost.savings_usd < 0:
        return f"none: {usd(-cost.savings_usd)} more than the same hours on demand{scope}"
    return f"{usd(cost.savings_usd)} ({cost.savings_fraction:.1%}) against the same hours on demand{scope}"


def redone(cost: JobCost) -> str:
    if not cost.steps_computed:
        return "no steps seen yet"
    figure = f"{cost.redone_steps} of {cost.steps_computed} steps computed were computed again"
    if cost.redone_cost_usd is None:
        return figure
    return f"{figure}: {usd(cost.redone_cost_usd)}, their share of the cost (at least)"


def usd(amount: float) -> str:
    # Cents for real jobs, more digits for the short local runs that cost a fraction of a cent.
    return f"${amount:,.2f}" if abs(amount) >= 1 else f"${amount:.4f}"


def _unpriced(cost: JobCost) -> str:
    if not cost.unpriced:
        return ""
    return f"; {len(cost.unpriced)} of {len(cost.instances)} instances not priced, left out (see the notes)"


def _notes(cost: JobCost) -> list[str]:
    return [f"note           {problem}" for problem in cost.problems]
