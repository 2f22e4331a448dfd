"""The work a run did, from every instance's journal: steps computed, redone, and the time a step takes.

A world of several nodes computes each step on every node at once. So stretches of training that
overlap in time (the nodes of one round) are one world and count once, as in `status`
(spot_trainer.costs.redone_work); unlike `status`, the journals show every step a node printed, power-offs
without notice included, so `redone` here is exact to the logging interval.

    steps computed = Σ over worlds (last step − first step)
    redone         = steps computed − the distinct steps the worlds cover
    step time      = Σ node time between first and last step line ÷ Σ the node steps in between
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from localcloud.journal import Stretch, TrainingLog
from spot_trainer.costs import redone_work


@dataclass(frozen=True)
class Work:
    steps_computed: int  # each step of a world once, redone ones included
    redone: int
    seconds_per_step: float  # a step's wall time on a node (0.0: no two step lines to time it by)
    node_seconds: float  # training time summed over nodes
    # The most nodes that trained at once: the job's world size when distributed (from the rounds the
    # agents logged: a command that prints no steps shows steps only on the node that publishes).
    nodes_together: int


def logged_work(logs: Iterable[TrainingLog]) -> Work:
    logs = list(logs)
    trained = [(instance, stretch) for instance, log in enumerate(logs) for stretch in log.stretches
               if stretch.first_step_at is not None]
    done = redone_work.work_done([as_cost_stretch(str(instance), stretch) for instance, stretch in trained])
    seconds = sum(stretch.seconds for _, stretch in trained)
    timed = sum(stretch.timed_steps for _, stretch in trained)
    return Work(steps_computed=done.computed, redone=done.redone, seconds_per_step=seconds / timed if timed else 0.0,
                node_seconds=seconds, nodes_together=max([most_at_once([stretch for _, stretch in trained]),
                                                          *(log.round_nodes for log in logs)]))


def as_cost_stretch(instance: str, stretch: Stretch) -> redone_work.Stretch:
    return redone_work.Stretch(instance=instance, started=stretch.started,
                               last_event=stretch.last_step_at or stretch.started,
                               first_step=stretch.first_step, last_step=stretch.last_step)


def most_at_once(stretches: list[Stretch]) -> int:
    """The most stretches training at one moment (a stretch ending as another starts does not overlap)."""
    moments = sorted([(s.started, 1) for s in stretches] + [(s.last_step_at or s.started, -1) for s in stretches])
    most = current = 0
    for _, change in moments:
        current += change
        most = max(most, current)
    return most
