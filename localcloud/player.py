"""EC2's part of the local spot cloud: boot every InService instance of the job's group (its own IMDS,
the launch template's own user data), interrupt instances as planned, power them off and terminate
them in moto, whose group then launches replacements, until the agent scales the group to 0. A job of
several regions: every region's group, and the regions controller that moves the job between them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcloud.capacity_watch import CapacityWatch
from localcloud.cloud import CloudError, Deployment, LocalCloud
from localcloud.iam_policy import ALLOWED
from localcloud.iam_report import of_stack
from localcloud.instance import Instance
from localcloud.interruptions import ANNOUNCED, HARD, Injector, Interruption
from localcloud.journal import TrainingLog
from localcloud.launch import Launcher, instance_settings
from localcloud.outages import OutageClock
from localcloud.region_groups import RegionGroups, group_market
from localcloud.regions_controller import RegionsController
from localcloud.run_options import RunOptions
from spot_trainer.capacity.policy import ON_DEMAND, SPOT

TICK_SECONDS = 0.25


@dataclass
class Player:
    """Plays EC2 for one deployed job until the agent scales its group to 0."""

    cloud: LocalCloud
    deployment: Deployment
    options: RunOptions
    instances: dict[str, Instance] = field(default_factory=dict)
    logs: dict[str, TrainingLog] = field(default_factory=dict)
    interruptions: list[Interruption] = field(default_factory=list)
    latest_history: list[int] = field(default_factory=list)  # latest.json steps as the player saw them
    most_alive: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    _pending_kills: dict[str, float] = field(default_factory=dict)
    _overlapping: dict[str, float] = field(default_factory=dict)  # rebalanced, notice not yet sent
    market_of: dict[str, str] = field(default_factory=dict)  # instance → the market it was launched in
    _waiting_for_spot: dict[str, float] = field(default_factory=dict)  # no spot capacity: not booted yet
    _replacing: dict[str, float] = field(default_factory=dict)  # wrong market: replacement launched
    _outages: OutageClock = field(init=False)
    _launcher: Launcher = field(init=False)
    _capacity_watch: CapacityWatch = field(init=False)
    _regions: RegionGroups = field(init=False)
    _controller: RegionsController | None = field(init=False)

    def __post_init__(self) -> None:
        self._outages = OutageClock(self.options.outages)
        self._launcher = Launcher(self.cloud, self.options.image, across_regions=bool(self.deployment.others))
        self._capacity_watch = CapacityWatch(self.cloud, self.deployment.group, self.options.watch_seconds)
        self._regions = RegionGroups(self.cloud, self.deployment)
        self._controller = RegionsController(self.cloud, self.deployment, self.options) \
            if self.deployment.others else None

    def run(self) -> Player:
        injector = self.options.injector or Injector(self.options.plan, self.options.total_steps)
        self.started_at = time.time()
        deadline = time.monotonic() + self.options.timeout_seconds
        try:
            while True:
                groups = self._regions.groups()
                self._reclaim_at_outages()
                for place, group in groups:
                    self._boot_new(place.region, group, group_market(group))
                self._watch()
                if all(group["DesiredCapacity"] == 0 for _, group in groups):
                    break
                self._inject(injector)
                self._notify_overlapping()
                self._replace_wrong_market({place.region: group_market(group) for place, group in groups})
                self._power_off_due()
                self._capacity_watch.tick()
                if self._controller is not None:
                    self._controller.tick()
                if self.options.on_tick:
                    self.options.on_tick(self)
                if time.monotonic() > deadline:
                    raise CloudError(f"the job did not finish within {self.options.timeout_seconds:.0f}s")
                time.sleep(TICK_SECONDS)
            self._let_agents_finish()
        finally:
            self.ended_at = time.time()
            for instance in self.instances.values():
                instance.kill()
            self._watch()
        self._refuse_denied_calls()
        return self

    def _refuse_denied_calls(self) -> None:
        """A call IAM denied fails the run, even one the agent survived: on AWS it is lost work or a
        lost log line, every time."""
        ours = [d for place in self.deployment.every_region()
                for d in of_stack(self.cloud.iam_decisions, self.cloud.client("iam"), place.stack)
                if d.decision != ALLOWED]
        if ours:
            raise CloudError(f"IAM denied {len(ours)} call(s) of the job's roles, first: {ours[0].line()} "
                             f"(all decisions: {self.cloud.iam_decisions})")

    # ---- EC2's part ----------------------------------------------------------------------------
    def _boot_new(self, region: str, group: dict[str, Any], market: str) -> None:
        for member in group["Instances"]:
            iid = member["InstanceId"]
            if iid in self.instances or member["LifecycleState"] != "InService":
                continue
            if market == SPOT and not self._outages.spot_available():
                if iid not in self._waiting_for_spot:
                    self._waiting_for_spot[iid] = time.time()
                    self.cloud.log(f"no spot capacity: instance {iid} cannot launch")
                continue
            if iid in self._waiting_for_spot and market == ON_DEMAND:
                # AWS launches an on-demand instance in its place; moto's group does once this one goes.
                del self._waiting_for_spot[iid]
                self._regions.terminate(iid)
                continue
            self._waiting_for_spot.pop(iid, None)
            settings = instance_settings(self.options)
            instance = self._launcher.launch(member, group, market, settings=settings, region=region,
                                             local_ipv4=f"127.0.0.{len(self.instances) % 250 + 2}")
            self.instances[iid] = instance
            self._regions.region_of[iid] = region
            self.logs[iid] = TrainingLog(instance.journal)
            self.market_of[iid] = market
            self.cloud.log(f"instance {iid} ({instance.instance_type}, {market}{self._where(region)}) launched")
        self.most_alive = max(self.most_alive, len(self.alive()))

    def region_of(self, iid: str) -> str:
        return self._regions.region_of.get(iid, self.deployment.region)

    def _where(self, region: str) -> str:
        return f", {region}" if self.deployment.others else ""  # a job of one region's lines stay as they were

    def alive(self) -> list[Instance]:
        return [i for i in self.instances.values() if i.ended_at is None]

    def _watch(self) -> None:
        self._read_training()
        for iid in self.logs:
            instance = self.instances[iid]
            failure = instance.bootstrap_failed() if instance.ended_at is None else None
            if failure:
                raise CloudError(f"instance {iid}: user data failed: {failure} (console: {instance.console})")
        latest = self.latest_step()
        if latest is not None and (not self.latest_history or self.latest_history[-1] != latest):
            self.latest_history.append(latest)
        for record in self.interruptions:
            if record.resumed_step is None:
                record.resumed_step = self._resumed_after(record)
            record.reached_step = self.logs[record.instance].max_step

    def _read_training(self) -> None:
        """Every journal's new lines, then the agents' new events (localcloud/journal.py says why in
        that order), into each instance's log."""
        lines = {iid: log.new_lines() for iid, log in self.logs.items()}
        now = time.time()  # one stamp for the tick: lines of different nodes read together are simultaneous
        events = self._regions.new_events()
        for iid, log in self.logs.items():
            log.take(lines[iid], events.get(iid, []), now)

    def _resumed_after(self, record: Interruption) -> int | None:
        for iid, log in self.logs.items():
            began = log.resumed_step is not None or log.started_fresh
            if self.instances[iid].launched_at >= record.at and began:
                return log.resumed_step or 0
        return None

    def latest_step(self) -> int | None:
        """The newest step S3 holds, in whichever of the job's regions it was saved."""
        return self._regions.latest_step()

    def training_instance(self) -> Instance | None:
        """The live instance running the command (the lease holder), by its latest step or start."""
        candidates = [(log.last_step_at or log.agent_started_at or 0.0, i) for i in self.alive()
                      if i.instance_id not in self._pending_kills and i.instance_id not in self._overlapping
                      and ((log := self.logs[i.instance_id]).max_step is not None
                           or log.agent_started_at is not None)]
        return max(candidates, key=lambda item: item[0])[1] if candidates else None

    def current_step(self) -> int | None:
        steps = [log.max_step for log in self.logs.values() if log.max_step is not None]
        return max(steps) if steps else None

    # ---- interruptions -------------------------------------------------------------------------
    def _inject(self, injector: Injector) -> None:
        target = self.training_instance()
        if self.options.plan.rate_per_hour is not None and target is None:
            target = self._first_untouched()
        if target is None or self.market_of.get(target.instance_id) == ON_DEMAND:
            return  # on-demand capacity is not reclaimed
        if self.options.may_interrupt is not None and not self.options.may_interrupt(target):
            return
        log = self.logs[target.instance_id]
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
            self.instances[iid].imds.recommend_rebalance()  # type: ignore[union-attr]
            self._overlapping[iid] = now
            self._regions.terminate(iid)
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

    def _first_untouched(self) -> Instance | None:
        """A live instance with no notice yet (one still booting, when none trains)."""
        untouched = [i for i in self.alive() if i.instance_id not in self._pending_kills
                     and i.instance_id not in self._overlapping]
        return untouched[0] if untouched else None

    def _interrupt(self, target: Instance, kind: str) -> bool:
        """Record the interruption; a hard one powers the instance off at once (True: nothing left to do)."""
        iid = target.instance_id
        self.interruptions.append(Interruption(kind, iid, time.time(), step_at_notice=self.logs[iid].max_step))
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

    def _notify_overlapping(self, most_wait: float = 90.0) -> None:
        """Send the notice to a rebalanced instance once its replacement's agent waits for the lease."""
        for iid, since in list(self._overlapping.items()):
            successors = [self.logs[i.instance_id] for i in self.alive() if i.launched_at > since]
            if any(log.waited_for_lease for log in successors) or time.time() - since > most_wait:
                del self._overlapping[iid]
                self._notify(self.instances[iid])

    # ---- markets and capacity ------------------------------------------------------------------
    def _reclaim_at_outages(self) -> None:
        """When spot capacity dries up (everywhere, or in one region of the plan), the running spot instances
        there get their notice."""
        latest = self.latest_history[-1] if self.latest_history else None
        everywhere = self._outages.advance(time.time() - self.started_at, latest)
        plan = self.options.region_plan
        regions = set(plan.advance(time.time(), latest)) if plan is not None else set()
        if not everywhere and not regions:
            return
        for instance in self.alive():
            iid = instance.instance_id
            there = everywhere or self._regions.region_of.get(iid) in regions
            if there and self.market_of.get(iid) == SPOT and iid not in self._pending_kills:
                self.interruptions.append(Interruption(ANNOUNCED, iid, time.time(),
                                                       step_at_notice=self.logs[iid].max_step))
                self.cloud.log(f"spot capacity outage: instance {iid} reclaimed")
                self._notify(instance)

    def _replace_wrong_market(self, markets: dict[str, str]) -> None:
        """As AWS after a change of a group's on-demand share: launch the replacement first, then
        scale the old instance in through its termination hook once the new agent is up."""
        for instance in self.alive():
            iid = instance.instance_id
            market = markets[self._regions.region_of.get(iid, self.deployment.region)]
            if iid in self._pending_kills or iid in self._overlapping:
                continue
            if iid in self._replacing:
                successors = [self.logs[i.instance_id] for i in self.alive()
                              if i.launched_at > self._replacing[iid]]
                if any(log.waited_for_lease for log in successors) or time.time() - self._replacing[iid] > 90:
                    del self._replacing[iid]
                    instance.scale_in()
                    self._pending_kills[iid] = time.time() + self.options.plan.notice_seconds
                    self.cloud.log(f"instance {iid}: scaled in, its {market} replacement is up")
                continue
            if self.market_of.get(iid) == market:
                continue
            if market == SPOT and not self._outages.spot_available():
                continue  # the spot replacement cannot launch: the on-demand instance stays
            self._replacing[iid] = time.time()
            self._regions.terminate(iid)
            self.cloud.log(f"instance {iid}: the group is now {market}, replacement launched")

    def _power_off_due(self) -> None:
        now = time.time()
        for iid, due in list(self._pending_kills.items()):
            if now >= due:
                self._power_off(self.instances[iid])

    def _power_off(self, instance: Instance) -> None:
        iid = instance.instance_id
        instance.kill()
        self._read_training()
        uploaded = self.latest_step()
        for record in self.interruptions:
            if record.instance == iid and record.killed_at is None:
                record.killed_at, record.uploaded_step = instance.ended_at, uploaded
        self._pending_kills.pop(iid, None)
        self._regions.terminate(iid)

    def _let_agents_finish(self, timeout: float = 15.0) -> None:
        """Desired capacity 0: moto drops the instances at once, where AWS holds them in the termination
        hook. Give the agents running now their last seconds (completing the hook, releasing the
        lease), and power off before systemd could restart one."""
        for instance in self.alive():
            instance.scale_in()
        agents = [pid for i in self.alive() if (pid := i.agent_pid()) is not None]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() and
                                                  b" Z " not in _stat(pid) for pid in agents):
            time.sleep(0.05)


def _stat(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return b" Z "


# What a command with no progress to show is given to start (imports, a restore) before its schedule counts.
STARTUP_ALLOWANCE_SECONDS = 60.0


def training_since(log: TrainingLog) -> float | None:
    """When an instance began to train, for a schedule placed in time: its first progress, or for a command
    that shows none, its agent's start and STARTUP_ALLOWANCE_SECONDS after it."""
    if log.first_step_at is not None:
        return log.first_step_at
    return None if log.agent_started_at is None else log.agent_started_at + STARTUP_ALLOWANCE_SECONDS
