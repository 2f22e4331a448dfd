"""Spot capacity as it changes during a run of the local spot cloud: an outage (everywhere, or in one region of
the plan) reclaims the spot instances there, and a group whose market changed gets its instances replaced in the
new market, the replacement launched first as AWS does."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from localcloud.fleet import Fleet
from localcloud.outages import OutageClock
from localcloud.reclaims import Reclaims
from localcloud.run_options import RunOptions
from spot_trainer.capacity.policy import SPOT

# How long an instance in the wrong market waits for its replacement's agent before it is scaled in all the same.
MOST_REPLACEMENT_WAIT_SECONDS = 90


@dataclass
class CapacityChanges:
    fleet: Fleet
    reclaims: Reclaims
    options: RunOptions
    outages: OutageClock
    _replacing: dict[str, float] = field(default_factory=dict)  # wrong market: replacement launched

    def reclaim_at_outages(self, elapsed: float, latest: int | None) -> None:
        """When spot capacity dries up (everywhere, or in one region of the plan), the running spot instances
        there get their notice."""
        everywhere = self.outages.advance(elapsed, latest)
        plan = self.options.region_plan
        regions = set(plan.advance(time.time(), latest)) if plan is not None else set()
        if not everywhere and not regions:
            return
        for instance in self.fleet.alive():
            iid = instance.instance_id
            there = everywhere or self.fleet.regions.region_of.get(iid) in regions
            if there and self.fleet.market_of.get(iid) == SPOT and not self.reclaims.noticed(iid):
                self.reclaims.reclaim(instance, "spot capacity outage")

    def replace_wrong_market(self, markets: dict[str, str]) -> None:
        """As AWS after a change of a group's on-demand share: launch the replacement first, then
        scale the old instance in through its termination hook once the new agent is up."""
        for instance in self.fleet.alive():
            iid = instance.instance_id
            market = markets[self.fleet.region_of(iid)]
            if self.reclaims.leaving(iid):
                continue
            if iid in self._replacing:
                successors = [self.fleet.logs[i.instance_id] for i in self.fleet.alive()
                              if i.launched_at > self._replacing[iid]]
                if any(log.waited_for_lease for log in successors) \
                        or time.time() - self._replacing[iid] > MOST_REPLACEMENT_WAIT_SECONDS:
                    del self._replacing[iid]
                    instance.scale_in()
                    self.reclaims.power_off_after_notice(iid)
                    self.fleet.cloud.log(f"instance {iid}: scaled in, its {market} replacement is up")
                continue
            if self.fleet.market_of.get(iid) == market:
                continue
            if market == SPOT and not self.outages.spot_available():
                continue  # the spot replacement cannot launch: the on-demand instance stays
            self._replacing[iid] = time.time()
            self.fleet.regions.terminate(iid)
            self.fleet.cloud.log(f"instance {iid}: the group is now {market}, replacement launched")
