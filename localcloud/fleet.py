"""The job's instances as EC2 keeps them: every InService member of the job's groups booted from its launch
template (its own IMDS, the template's user data) unless its market has no capacity, each one's training read
from its journal and the agents' events, and an instance powered off and terminated in moto, whose group then
launches its replacement."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcloud.cloud import CloudError, Deployment, LocalCloud
from localcloud.instance import Instance
from localcloud.journal import TrainingLog
from localcloud.launch import Launcher, instance_settings
from localcloud.outages import OutageClock
from localcloud.region_groups import RegionGroups
from localcloud.run_options import RunOptions
from spot_trainer.capacity.policy import ON_DEMAND, SPOT


@dataclass
class Fleet:
    cloud: LocalCloud
    deployment: Deployment
    options: RunOptions
    outages: OutageClock  # no spot capacity: a spot member waits, not booted
    instances: dict[str, Instance] = field(default_factory=dict)
    logs: dict[str, TrainingLog] = field(default_factory=dict)
    market_of: dict[str, str] = field(default_factory=dict)  # instance → the market it was launched in
    most_alive: int = 0
    _waiting_for_spot: dict[str, float] = field(default_factory=dict)  # no spot capacity: not booted yet
    _launcher: Launcher = field(init=False)
    regions: RegionGroups = field(init=False)

    def __post_init__(self) -> None:
        self._launcher = Launcher(self.cloud, self.options.image, across_regions=bool(self.deployment.others))
        self.regions = RegionGroups(self.cloud, self.deployment)

    def boot_new(self, region: str, group: dict[str, Any], market: str) -> None:
        for member in group["Instances"]:
            iid = member["InstanceId"]
            if iid in self.instances or member["LifecycleState"] != "InService":
                continue
            if market == SPOT and not self.outages.spot_available():
                if iid not in self._waiting_for_spot:
                    self._waiting_for_spot[iid] = time.time()
                    self.cloud.log(f"no spot capacity: instance {iid} cannot launch")
                continue
            if iid in self._waiting_for_spot and market == ON_DEMAND:
                # AWS launches an on-demand instance in its place; moto's group does once this one goes.
                del self._waiting_for_spot[iid]
                self.regions.terminate(iid)
                continue
            self._waiting_for_spot.pop(iid, None)
            settings = instance_settings(self.options)
            instance = self._launcher.launch(member, group, market, settings=settings, region=region,
                                             local_ipv4=f"127.0.0.{len(self.instances) % 250 + 2}")
            self.instances[iid] = instance
            self.regions.region_of[iid] = region
            self.logs[iid] = TrainingLog(instance.journal)
            self.market_of[iid] = market
            self.cloud.log(f"instance {iid} ({instance.instance_type}, {market}{self._where(region)}) launched")
        self.most_alive = max(self.most_alive, len(self.alive()))

    def region_of(self, iid: str) -> str:
        return self.regions.region_of.get(iid, self.deployment.region)

    def _where(self, region: str) -> str:
        return f", {region}" if self.deployment.others else ""  # a job of one region's lines stay as they were

    def alive(self) -> list[Instance]:
        return [i for i in self.instances.values() if i.ended_at is None]

    def read_training(self) -> None:
        """Every journal's new lines, then the agents' new events (localcloud/journal.py says why in
        that order), into each instance's log."""
        lines = {iid: log.new_lines() for iid, log in self.logs.items()}
        now = time.time()  # one stamp for the tick: lines of different nodes read together are simultaneous
        events = self.regions.new_events()
        for iid, log in self.logs.items():
            log.take(lines[iid], events.get(iid, []), now)

    def refuse_failed_bootstraps(self) -> None:
        """A live instance whose user data failed fails the run, with its console to read."""
        for iid in self.logs:
            instance = self.instances[iid]
            failure = instance.bootstrap_failed() if instance.ended_at is None else None
            if failure:
                raise CloudError(f"instance {iid}: user data failed: {failure} (console: {instance.console})")

    def latest_step(self) -> int | None:
        """The newest step S3 holds, in whichever of the job's regions it was saved."""
        return self.regions.latest_step()

    def current_step(self) -> int | None:
        steps = [log.max_step for log in self.logs.values() if log.max_step is not None]
        return max(steps) if steps else None

    def power_off(self, instance: Instance) -> int | None:
        """The instance's power cut and its last lines read; the step S3 held then (None: none yet)."""
        instance.kill()
        self.read_training()
        return self.latest_step()

    def let_agents_finish(self, timeout: float = 15.0) -> None:
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
