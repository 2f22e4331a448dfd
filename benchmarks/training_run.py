"""A simulated job's training on one instance at a time, as the deadline and the regions simulations play it minute by
minute: the market its group is set to, the instance that runs, the boot left, the steps, the newest checkpoint and
what has been billed. Each simulation adds what only it follows."""

from __future__ import annotations

from dataclasses import dataclass

from spot_trainer.capacity.policy import SPOT


@dataclass
class TrainingRun:
    market: str = SPOT  # the market the group is set to
    instance: str | None = None  # the market of the running instance, None while nothing runs
    booting: int = 0  # minutes of boot and restore left
    step: int = 0
    saved: int = 0  # the step of the newest checkpoint
    since_save: int = 0
    trained: bool = False  # a step has been timed: the pace is known
    cost: float = 0.0
    minutes: int = 0  # minutes an instance ran, billed
    on_demand_minutes: int = 0
