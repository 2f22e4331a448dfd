"""The deadline, kept from the training node: while the command runs, compare its progress with the
straight line to the deadline (spot_trainer/capacity/policy.py) and switch the job's own group to
on-demand when it falls behind, back to spot once comfortably ahead. Every switch is an event (and
so a notification) and a line in the log. The capacity watch acts while no instance runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...capacity.market import GroupClient, group_market, set_group_market
from ...capacity.policy import SPOT, DeadlinePlan, Progress, choose_market, parse_deadline, parse_duration
from ...storage.record_kinds import EventKind
from ..instance.config import AgentConfig, known_total_steps
from ..records.pace import Pace
from ..records.telemetry import RunTelemetry


@dataclass
class DeadlineWatch:
    plan: DeadlinePlan
    group_name: str
    autoscaling: GroupClient
    event: Callable[..., None]  # telemetry.event: the record, the notification
    log: Callable[[str], None]
    clock: Callable[[], float] = time.time
    check_seconds: float = 30.0
    market: str = ""  # the group's market as last read or set
    pace: Pace = field(default_factory=Pace)
    _next_check: float = 0.0
    _switched_at: float = float("-inf")

    def check(self, step: int | None) -> None:
        """Called from the agent's poll loop; acts at most every `check_seconds`."""
        now = self.clock()
        if step is None or now < self._next_check or not self.group_name:
            return
        self._next_check = now + self.check_seconds
        try:
            self.market = self.market or group_market(self.autoscaling, self.group_name)
            decision = choose_market(self.plan, Progress(now, step, self.pace.seconds_per_step(now, step)),
                                     self.market)
            if decision.market == self.market or self._too_soon_to_leave_on_demand(now, decision.market):
                return
            set_group_market(self.autoscaling, self.group_name, decision.market)
        except Exception as error:  # a throttled call, a missing permission: training goes on
            self.log(f"could not apply the deadline policy: {error}")
            return
        self.log(f"switched {self.group_name} from {self.market} to {decision.market}: {decision.reason}")
        self.event(EventKind.MARKET, step=step, reason=decision.reason, **{"from": self.market, "to": decision.market})
        self.market, self._switched_at = decision.market, now

    def _too_soon_to_leave_on_demand(self, now: float, market: str) -> bool:
        """Each switch replaces the instance: a switch to on-demand is never delayed, but the way
        back waits a margin, so a passing lead does not pay for two replacements."""
        return market == SPOT and now - self._switched_at < self.plan.margin_seconds


def plan_from(deadline: str, margin: str, total_steps: int, first_start: float) -> DeadlinePlan:
    """The plan the settings describe (already checked by check_config); ValueError naming the
    problem when the deadline cannot be kept at all (it falls within the margin of the first start)."""
    return DeadlinePlan.checked(first_start, parse_deadline(deadline, first_start), total_steps,
                                parse_duration(margin))


def status_fields(plan: DeadlinePlan) -> dict[str, Any]:
    """What status.json carries so the capacity watch can draw the same line while nothing runs."""
    return {"first_started_at": plan.first_start, "deadline_at": plan.deadline_at,
            "total_steps": plan.total_steps, "margin_seconds": plan.margin_seconds}


def deadline_watch_for(config: AgentConfig, autoscaling: GroupClient, telemetry: RunTelemetry,
                       first_start: float) -> DeadlineWatch | None:
    """The deadline policy for this run, or None without a deadline (or a job size to judge it by);
    the plan goes into status.json for the capacity watch."""
    if not config.deadline:
        return None
    total = known_total_steps(config)
    if total < 1:
        _not_kept(telemetry, "the job's size is unknown: set total_steps in the job file's [schedule] "
                             "(console: TotalSteps)")
        return None
    try:
        plan = plan_from(config.deadline, config.deadline_margin, total, first_start)
    except ValueError as error:
        _not_kept(telemetry, str(error))
        return None
    telemetry.update(**status_fields(plan))
    return DeadlineWatch(plan, config.asg_name, autoscaling, telemetry.event, telemetry.log,
                         check_seconds=config.deadline_check_seconds)


def _not_kept(telemetry: RunTelemetry, why: str) -> None:
    """Said where the user looks (the log, status.json's warning, the events), never silently."""
    telemetry.warn(f"the deadline is not kept: {why}")
