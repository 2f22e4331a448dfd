"""What one run of the local spot cloud plays: the interruptions and outages, the instances' image, the
agent's extra settings and the command's environment, and how long the job may take."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from localcloud.images import ImageFacts
from localcloud.instance import Instance
from localcloud.interruptions import Injector, InterruptionPlan, PlanError
from localcloud.outages import SpotOutage
from localcloud.region_capacity import RegionPlan


@dataclass
class RunOptions:
    plan: InterruptionPlan = field(default_factory=InterruptionPlan)
    total_steps: int | None = None
    timeout_seconds: float = 900.0
    settings: dict[str, str] = field(default_factory=dict)  # extra agent settings for every instance
    command_env: dict[str, str] = field(default_factory=dict)  # extra environment of the training command
    outages: list[SpotOutage] = field(default_factory=list)  # windows with no spot capacity
    watch_seconds: float = 2.0  # how often the capacity watch and the regions controller run (AWS: every minute)
    region_plan: RegionPlan | None = None  # a job of several regions: each region's capacity and score
    region_wait: str = "20s"  # the job's capacity.region_wait at the local cloud's pace
    price_trace: Path | None = None  # spot prices for the cost report (default: a flat 30% of on-demand)
    image: ImageFacts | None = None  # instances play this image as it is (default: an env with torch)
    # An instance is interrupted only once this says so (default: as the plan places it), e.g. once the
    # environment it built is stored.
    may_interrupt: Callable[[Instance], bool] | None = None
    # The schedule to follow (default: a fresh one from `plan`); one shared by several runs of the same
    # job, as `python -m localcloud up` plays it through pauses, goes on where the last run left it.
    injector: Injector | None = None


def command_env(assignments: list[str]) -> dict[str, str]:
    """`--env NAME=VALUE` flags as the command's environment, or one line for one that is not."""
    env = {}
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals or not name.isidentifier():
            raise PlanError(f"--env {assignment!r}: expected NAME=VALUE")
        env[name] = value
    return env
