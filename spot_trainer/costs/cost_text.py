"""A job's cost in words, in the status command's two-column layout."""

from __future__ import annotations

from .budget import Outlook
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


def describe_outlook(outlook: Outlook) -> list[str]:
    """The cap beside the spend, and what finishing would cost at the current pace and prices."""
    if outlook.budget_usd is None:
        budget = "none set ([schedule] budget_usd; console: BudgetUSD)"
    else:
        share = outlook.spent_usd / outlook.budget_usd
        budget = f"{usd(outlook.spent_usd)} spent of {usd(outlook.budget_usd)} ({share:.0%})"
    return [f"budget         {budget}", f"to finish      {to_finish(outlook)}"]


def to_finish(outlook: Outlook) -> str:
    if outlook.remaining_steps is None:
        return "not known: the job's size is unknown ([schedule] total_steps; console: TotalSteps)"
    if outlook.remaining_steps <= 0:
        return "nothing: every step is done"
    if outlook.seconds_per_step is None:
        return "not known yet: no pace measured (steps or checkpoints seen since the last start)"
    if outlook.to_finish_usd is None:
        return "not known: no instance to price"
    whole = f", {usd(outlook.spent_usd + outlook.to_finish_usd)} in all"
    over = ("; over the budget by " + usd(outlook.spent_usd + outlook.to_finish_usd - outlook.budget_usd)
            if outlook.budget_usd is not None and outlook.spent_usd + outlook.to_finish_usd > outlook.budget_usd
            else "")
    return (f"{usd(outlook.to_finish_usd)} more for {outlook.remaining_steps} steps at "
            f"{outlook.seconds_per_step:.3g} s/step and {usd(outlook.usd_per_hour)}/h now{whole}{over} "
            "(boots and interruptions not counted)")


def saved(cost: JobCost) -> str:
    if cost.savings_fraction is None:
        return "not known (no instance priced both ways)"
    scope = " (priced instances only)" if cost.unpriced else ""
    if cost.savings_usd < 0:
        return f"none: {usd(-cost.savings_usd)} more than the same hours on demand{scope}"
    return f"{usd(cost.savings_usd)} ({cost.savings_fraction:.1%}) against the same hours on demand{scope}"


def redone(cost: JobCost) -> str:
    if cost.steps_unknown and not cost.steps_computed:
        return "unknown: the job's checkpoints state no step (they go by the time they were written)"
    if not cost.steps_computed:
        return "no steps seen yet"
    # A power-off hides the steps its instance ran after its last heartbeat: then the count is a floor.
    bound = "at least " if cost.losses.power_offs else ""
    figure = f"{bound}{cost.redone_steps} of {cost.steps_computed} steps computed were computed again"
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
