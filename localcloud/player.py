"""EC2's part of the local spot cloud, one tick after another until the agent scales the job's group to 0: the
instances launched and powered off (fleet.py), spot's reclaims as planned (reclaims.py), outages and changes of
market (capacity_changes.py), and for a job of several regions every region's group and the regions controller
that moves the job between them. What the run leaves (its instances, their logs, the interruptions, the steps S3
held) is read from here by the report."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from localcloud.capacity_changes import CapacityChanges
from localcloud.capacity_watch import CapacityWatch
from localcloud.cloud import CloudError, Deployment, LocalCloud
from localcloud.fleet import Fleet
from localcloud.iam_policy import ALLOWED
from localcloud.iam_report import of_stack
from localcloud.instance import Instance
from localcloud.interruptions import ANNOUNCED, Injector, Interruption
from localcloud.journal import TrainingLog
from localcloud.outages import OutageClock
from localcloud.reclaims import Reclaims
from localcloud.region_groups import group_market
from localcloud.regions_controller import RegionsController
from localcloud.run_options import RunOptions

TICK_SECONDS = 0.25


@dataclass
class Player:
    """Plays EC2 for one deployed job until the agent scales its group to 0."""

    cloud: LocalCloud
    deployment: Deployment
    options: RunOptions
    on_tick: Callable[[Player], None] | None = None  # called each tick with the run so far (progress, hooks)
    latest_history: list[int] = field(default_factory=list)  # latest.json steps as the player saw them
    started_at: float = 0.0
    ended_at: float = 0.0
    fleet: Fleet = field(init=False)
    reclaims: Reclaims = field(init=False)
    _changes: CapacityChanges = field(init=False)
    _capacity_watch: CapacityWatch = field(init=False)
    _controller: RegionsController | None = field(init=False)

    def __post_init__(self) -> None:
        outages = OutageClock(self.options.outages)
        self.fleet = Fleet(self.cloud, self.deployment, self.options, outages)
        self.reclaims = Reclaims(self.fleet, self.options)
        self._changes = CapacityChanges(self.fleet, self.reclaims, self.options, outages)
        self._capacity_watch = CapacityWatch(self.cloud, self.deployment.group, self.options.watch_seconds)
        self._controller = RegionsController(self.cloud, self.deployment, self.options) \
            if self.deployment.others else None

    def run(self) -> Player:
        injector = self.options.injector or Injector(self.options.plan, self.options.total_steps)
        self.started_at = time.time()
        deadline = time.monotonic() + self.options.timeout_seconds
        try:
            while True:
                groups = self.fleet.regions.groups()
                latest = self.latest_history[-1] if self.latest_history else None
                self._changes.reclaim_at_outages(time.time() - self.started_at, latest)
                for place, group in groups:
                    self.fleet.boot_new(place.region, group, group_market(group))
                self._watch()
                if all(group["DesiredCapacity"] == 0 for _, group in groups):
                    break
                self.reclaims.inject(injector)
                self.reclaims.notify_overlapping()
                self._changes.replace_wrong_market({place.region: group_market(group) for place, group in groups})
                self.reclaims.power_off_due()
                self._capacity_watch.tick()
                if self._controller is not None:
                    self._controller.tick()
                if self.on_tick:
                    self.on_tick(self)
                if time.monotonic() > deadline:
                    raise CloudError(f"the job did not finish within {self.options.timeout_seconds:.0f}s")
                time.sleep(TICK_SECONDS)
            self.fleet.let_agents_finish()
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

    def _watch(self) -> None:
        self.fleet.read_training()
        self.fleet.refuse_failed_bootstraps()
        latest = self.latest_step()
        if latest is not None and (not self.latest_history or self.latest_history[-1] != latest):
            self.latest_history.append(latest)
        self.reclaims.follow_up()

    # ---- the run as the report, the progress line and the tests read it ---------------------------
    @property
    def instances(self) -> dict[str, Instance]:
        return self.fleet.instances

    @property
    def logs(self) -> dict[str, TrainingLog]:
        return self.fleet.logs

    @property
    def market_of(self) -> dict[str, str]:
        """Instance → the market it was launched in."""
        return self.fleet.market_of

    @property
    def most_alive(self) -> int:
        return self.fleet.most_alive

    @property
    def interruptions(self) -> list[Interruption]:
        return self.reclaims.interruptions

    def region_of(self, iid: str) -> str:
        return self.fleet.region_of(iid)

    def alive(self) -> list[Instance]:
        return self.fleet.alive()

    def latest_step(self) -> int | None:
        """The newest step S3 holds, in whichever of the job's regions it was saved."""
        return self.fleet.latest_step()

    def current_step(self) -> int | None:
        return self.fleet.current_step()

    def training_instance(self) -> Instance | None:
        """The live instance running the command (the lease holder), by its latest step or start."""
        return self.reclaims.training_instance()

    def interrupt_now(self, kind: str = ANNOUNCED) -> Instance | None:
        """Take the instance training (or else one booting) away now: a notice, or with HARD a power-off
        without one. None when no instance is up to take."""
        return self.reclaims.interrupt_now(kind)
