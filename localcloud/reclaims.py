"""Spot's reclaims as the local spot cloud plays them: an interruption notice (a rebalance recommendation first,
where the plan says so, its replacement launched at once) and the power-off when the notice runs out, or a power-off
without notice; each one recorded with the steps it cost."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from localcloud.cloud import LocalCloud
from localcloud.fleet import Fleet
from localcloud.instance import Instance
from localcloud.interruptions import ANNOUNCED, HARD, Injector, Interruption
from localcloud.journal import TrainingLog
from localcloud.run_options import RunOptions
from spot_trainer.capacity.policy import ON_DEMAND

# What a command with no progress to show is given to start (imports, a restore) before its schedule counts.
STARTUP_ALLOWANCE_SECONDS = 60.0


@dataclass
class Reclaims:
    fleet: Fleet
    options: RunOptions
    interruptions: list[Interruption] = field(default_factory=list)
    _pending_kills: dict[str, float] = field(default_factory=dict)  # noticed: powered off at this time
    _overlapping: dict[str, float] = field(default_factory=dict)  # rebalanced, notice not yet sent

    @property
    def cloud(self) -> LocalCloud:
        return self.fleet.cloud

    def noticed(self, iid: str) -> bool:
        """Whether the instance has its notice (or is due to power off without one)."""
        return iid in self._pending_kills

    def leaving(self, iid: str) -> bool:
        """Whether the instance is on its way out: noticed, or rebalanced with its notice still to come."""
        return self.noticed(iid) or iid in self._overlapping

    def training_instance(self) -> Instance | None:
        """The live instance running the command (the lease holder), by its latest step or start."""
        logs = self.fleet.logs
        candidates = [(log.last_step_at or log.agent_started_at or 0.0, i) for i in self.fleet.alive()
                      if not self.leaving(i.instance_id)
                      and ((log := logs[i.instance_id]).max_step is not None
                           or log.agent_started_at is not None)]
        return max(candidates, key=lambda item: item[0])[1] if candidates else None

    def inject(self, injector: Injector) -> None:
        target = self.training_instance()
        if self.options.plan.rate_per_hour is not None and target is None:
            target = self._first_untouched()
        if target is None or self.fleet.market_of.get(target.instance_id) == ON_DEMAND:
            return  # on-demand capacity is not reclaimed
        if self.options.may_interrupt is not None and not self.options.may_interrupt(target):
            return
        log = self.fleet.logs[target.instance_id]
        # Placed in time, an interruption counts from the instance's first progress (a step line, or
        # for a command that prints none its first new checkpoint): start-up is not training time. A
        # command that shows neither is still interrupted, counted from its agent's start and a minute of
        # start-up: a script whose saves nobody recognises must not escape the schedule.
        kind = injector.due(time.time(), log.max_step, log.resumed_step or 0, training_since(log))
        if kind is None:
            return
        if self._interrupt(target, kind):
            return
        announced = sum(1 for r in self.interruptions if r.kind == ANNOUNCED)
        iid, now = target.instance_id, time.time()
        if injector.early_replacement(announced):
            # Capacity rebalancing: a rebalance recommendation, the replacement launched at once, and
            # the interruption notice only once the replacement's agent is up beside this one.
            self.fleet.instances[iid].imds.recommend_rebalance()  # type: ignore[union-attr]
            self._overlapping[iid] = now
            self.fleet.regions.terminate(iid)
            self.cloud.log(f"instance {iid}: rebalance recommendation, replacement launched now")
            return
        self._notify(target)

    def interrupt_now(self, kind: str = ANNOUNCED) -> Instance | None:
        """Take the instance training (or else one booting) away now: a notice, or with HARD a power-off
        without one. None when no instance is up to take."""
        target = self.training_instance() or self._first_untouched()
        if target is not None and not self._interrupt(target, kind):
            self._notify(target)
        return target

    def reclaim(self, instance: Instance, why: str) -> None:
        """A notice for a spot instance whose capacity went (`why` says how), recorded as an interruption."""
        iid = instance.instance_id
        self.interruptions.append(Interruption(ANNOUNCED, iid, time.time(),
                                               step_at_notice=self.fleet.logs[iid].max_step))
        self.cloud.log(f"{why}: instance {iid} reclaimed")
        self._notify(instance)

    def power_off_after_notice(self, iid: str) -> None:
        """The instance powered off once a notice's time has passed (it was scaled in, say)."""
        self._pending_kills[iid] = time.time() + self.options.plan.notice_seconds

    def _first_untouched(self) -> Instance | None:
        """A live instance with no notice yet (one still booting, when none trains)."""
        untouched = [i for i in self.fleet.alive() if not self.leaving(i.instance_id)]
        return untouched[0] if untouched else None

    def _interrupt(self, target: Instance, kind: str) -> bool:
        """Record the interruption; a hard one powers the instance off at once (True: nothing left to do)."""
        iid = target.instance_id
        self.interruptions.append(Interruption(kind, iid, time.time(), step_at_notice=self.fleet.logs[iid].max_step))
        if kind != HARD:
            return False
        self.cloud.log(f"instance {iid}: reclaimed without notice")
        self._power_off(target)
        return True

    def _notify(self, target: Instance) -> None:
        notice = self.options.plan.notice_seconds
        target.announce(notice, rebalance=self.options.plan.rebalance)
        self._pending_kills[target.instance_id] = time.time() + notice
        self.cloud.log(f"instance {target.instance_id}: spot interruption notice, {notice:g}s to go")

    def notify_overlapping(self, most_wait: float = 90.0) -> None:
        """Send the notice to a rebalanced instance once its replacement's agent waits for the lease."""
        for iid, since in list(self._overlapping.items()):
            successors = [self.fleet.logs[i.instance_id] for i in self.fleet.alive() if i.launched_at > since]
            if any(log.waited_for_lease for log in successors) or time.time() - since > most_wait:
                del self._overlapping[iid]
                self._notify(self.fleet.instances[iid])

    def power_off_due(self) -> None:
        now = time.time()
        for iid, due in list(self._pending_kills.items()):
            if now >= due:
                self._power_off(self.fleet.instances[iid])

    def _power_off(self, instance: Instance) -> None:
        iid = instance.instance_id
        uploaded = self.fleet.power_off(instance)
        for record in self.interruptions:
            if record.instance == iid and record.killed_at is None:
                record.killed_at, record.uploaded_step = instance.ended_at, uploaded
        self._pending_kills.pop(iid, None)
        self.fleet.regions.terminate(iid)

    def follow_up(self) -> None:
        """Each interruption's steps as far as they are known: where its successor resumed, how far it got."""
        for record in self.interruptions:
            if record.resumed_step is None:
                record.resumed_step = self._resumed_after(record)
            record.reached_step = self.fleet.logs[record.instance].max_step

    def _resumed_after(self, record: Interruption) -> int | None:
        for iid, log in self.fleet.logs.items():
            began = log.resumed_step is not None or log.started_fresh
            if self.fleet.instances[iid].launched_at >= record.at and began:
                return log.resumed_step or 0
        return None


def training_since(log: TrainingLog) -> float | None:
    """When an instance began to train, for a schedule placed in time: its first progress, or for a command
    that shows none, its agent's start and STARTUP_ALLOWANCE_SECONDS after it."""
    if log.first_step_at is not None:
        return log.first_step_at
    return None if log.agent_started_at is None else log.agent_started_at + STARTUP_ALLOWANCE_SECONDS
