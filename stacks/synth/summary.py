"""The few lines a synth ends with: how the job's nodes train, where Python and torch come from, what the
spending cap buys at the highest price the job can pay, and whether the grace period fits a spot notice.

The price a spot instance can be charged is capped by `max_price`, or else by the on-demand price (the
group's SpotMaxPrice left unset: https://docs.aws.amazon.com/autoscaling/ec2/APIReference/
API_InstancesDistribution.html), so the cap buys at least budget / (nodes x that price) hours.
"""

from __future__ import annotations

from spot_trainer.costs.on_demand_prices import USD_PER_HOUR
from stacks.job.spec import JobSpec
from stacks.synth.notice_fit import grace_warning


def nodes_line(job: JobSpec) -> str:
    cap = job.capacity
    types = " or ".join(cap.instance_types)
    if cap.nodes == 1:
        return f"1 node ({types}) trains; after an interruption a replacement resumes from the newest checkpoint"
    if cap.distributed:
        return (f"{cap.nodes} nodes ({types}) train one model together under torchrun elastic, going on while "
                f"{cap.min_nodes or cap.nodes} are up")
    return (f"{cap.nodes} nodes ({types}): one trains and {cap.nodes - 1} stand by to take over; to train on all "
            f"{cap.nodes}, set capacity.distributed = true")


def python_line(job: JobSpec) -> str:
    image = job.capacity.ami
    if "pytorch" in image.lower():
        source = "the image's PyTorch env (/opt/pytorch), torch as the image ships it"
    else:
        source = "a Python 3.11+ venv on the image, torch installed at boot when the image has none"
    pinned = " (then run.setup)" if job.run.setup else "; pin your own with run.setup = \"pip install torch==…\""
    return f"image {image}: {source}{pinned}"


def budget_line(job: JobSpec) -> str:
    budget = job.schedule.budget_usd
    if not budget:
        return "no spending cap (schedule.budget_usd): the job spends until it is done"
    cap = job.capacity
    if cap.max_price:
        price, what = float(cap.max_price), f"your max price ${float(cap.max_price):g}/h"
    else:
        known = {t: USD_PER_HOUR[t] for t in cap.instance_types if t in USD_PER_HOUR}
        if not known:
            return f"cap ${budget:g}: no on-demand price known for {', '.join(cap.instance_types)} to say what it buys"
        dearest = max(known, key=lambda t: known[t])
        price, what = known[dearest], f"the on-demand cap of {dearest}, ${known[dearest]:g}/h"
    hours = budget / (cap.nodes * price)
    return f"cap ${budget:g} buys at least {hours:.1f} h of {cap.nodes} x {', '.join(cap.instance_types)} at {what}"


def notice_line(job: JobSpec) -> str:
    return grace_warning(job) or (f"a spot notice leaves the command its full run.grace_seconds = "
                                  f"{job.run.grace_seconds:g} s to save")


def summary_lines(job: JobSpec) -> list[str]:
    return [f"{job.stack_name}: {nodes_line(job)}", python_line(job), budget_line(job), notice_line(job)]
