"""A job of three regions (jobs/regions.toml) moves from home, which lost its spot capacity, to eu-west-1, and the
instance there loses power while it restores home's step across regions: the link between regions is slow here
(0.3 Mbps, so the restore takes seconds), and the instance is powered off once the eu-west-1 proxy has carried a
third of the step to it. Its replacement restores the same step across regions again (nothing was published in
eu-west-1), no completed step is lost, the job ends DONE, nothing half-restored is resumed from, and each restore
moved at most 1.05 times the step's size across regions. One run; each test checks one promise."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from localcloud.cloud import LocalCloud
from localcloud.iam_policy import ALLOWED
from localcloud.iam_report import of_stack
from localcloud.instance import Instance
from localcloud.interruptions import HARD, InterruptionPlan
from localcloud.player import Player
from localcloud.region_capacity import Board, RegionPlan, parse_region_outage
from localcloud.region_link import CrossRegionLink
from localcloud.report import build_report
from spot_trainer.storage.record_kinds import EventKind
from spot_trainer.storage.saves import layouts
from spot_trainer.storage.steps.remote import RemoteStore
from tests.e2e.conftest import Scenario, job_of_its_own, play
from tests.e2e.test_region_moves import HIGH, HOME, LOW, NOTICE_SECONDS, STEPS, instances_in, store

SLOW_MBPS = 0.3  # about 37 kB/s: the example's step of about 300 kB crosses in about 8 s
KILL_AT = 1 / 3  # of the step's bytes carried to the instance


@dataclass
class PowerOffMidRestore:
    """The player's tick: power off the first eu-west-1 instance once a third of the step has crossed to it, and
    note what the proxy carried to each eu-west-1 instance by the time it resumed (or was powered off)."""

    size: int = 0  # the bytes of home's newest step, read once the job is in eu-west-1
    killed: str | None = None
    crossed: dict[str, int] = field(default_factory=dict)  # instance → bytes across regions when it resumed/died

    def __call__(self, player: Player) -> None:
        proxy = player.cloud.proxies.get(HIGH)
        ours = [player.instances[iid] for iid in player.instances if player.region_of(iid) == HIGH]
        if proxy is None or not ours:
            return
        self.size = self.size or step_size(player)
        for instance in ours:
            carried = proxy.bytes_crossed(key_of(instance))
            if self.killed is None and carried >= KILL_AT * self.size and instance.ended_at is None:
                target = player.interrupt_now(HARD)
                assert target is instance, (target, instance)
                self.killed = instance.instance_id
                self.crossed[instance.instance_id] = proxy.bytes_crossed(key_of(instance))
            elif player.logs[instance.instance_id].resumed_step is not None:
                self.crossed.setdefault(instance.instance_id, carried)


def key_of(instance: Instance) -> str:
    assert instance.role is not None
    return instance.role.access_key_id


def step_size(player: Player) -> int:
    """The bytes of the newest step home's bucket holds, as its manifest lists them."""
    (place,) = [p for p in player.deployment.every_region() if p.region == HOME]
    home = RemoteStore(player.cloud.client("s3", HOME), place.bucket, place.job)
    step = home.latest_step()
    assert step is not None
    manifest = home.get_json(home.step_prefix(step) + "MANIFEST.json", absolute=True)
    assert manifest is not None
    return sum(int(entry["size"]) for entry in manifest["files"].values())


@dataclass
class Run:
    scenario: Scenario
    watch: PowerOffMidRestore


@pytest.fixture(scope="module")
def run(local_cloud: LocalCloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    app = local_cloud.synth(job_of_its_own(tmp_path_factory, "cutoff", like="regions"))
    plan = RegionPlan([parse_region_outage(f"{HOME}:step20:900")], {LOW: 3}, local_cloud.capacity_board)
    watch = PowerOffMidRestore()
    before = local_cloud.link
    local_cloud.link.mbps = SLOW_MBPS  # every region's proxy plays the link as it is at each request
    try:
        for scenario in play(local_cloud, app, InterruptionPlan(count=0, notice_seconds=NOTICE_SECONDS), {},
                             total_steps=STEPS, region_plan=plan, on_tick=watch):
            print(f"step of {watch.size} bytes; across regions, by eu-west-1 instance until it resumed or lost "
                  f"power: {watch.crossed}")
            yield Run(scenario, watch)
    finally:
        local_cloud.link.mbps = CrossRegionLink().mbps
        assert local_cloud.link is before
        Board().write(local_cloud.capacity_board)  # capacity everywhere again for the scenarios after this one


def test_the_instance_was_powered_off_mid_restore_and_the_job_ends_done_in_the_new_region(run: Run) -> None:
    scenario, watch = run.scenario, run.watch
    killed, replacement = instances_in(scenario, HIGH)
    assert watch.killed == killed
    assert [(r.kind, r.instance) for r in scenario.player.interruptions][-1] == (HARD, killed)
    assert 0 < watch.crossed[killed] < watch.size  # cut short mid-restore, as the proxy counted
    assert scenario.player.latest_step() == STEPS
    assert store(scenario, HIGH).get_json("status.json")["state"] == "DONE"
    assert [(m["from"], m["to"]) for m in build_report(scenario.player, None).region_moves] == [(HOME, HIGH)]
    assert replacement != killed and instances_in(scenario, LOW) == []


def test_the_replacement_restores_the_same_step_across_regions_and_no_completed_step_is_lost(run: Run) -> None:
    scenario = run.scenario
    (home_instance,) = instances_in(scenario, HOME)
    killed, replacement = instances_in(scenario, HIGH)
    saved_home = store(scenario, HOME).latest_step()
    logs = scenario.player.logs
    assert saved_home is not None and logs[home_instance].max_step == saved_home  # its emergency save reached S3
    assert logs[killed].max_step is None and logs[killed].resumed_step is None  # it never trained
    assert logs[replacement].resumed_step == saved_home  # from home's step, nothing published in eu-west-1 between
    restores = [e for r in (HOME, LOW, HIGH) for e in store(scenario, r).events() if e["kind"] == "region_restore"]
    assert [(e["instance"], e["region"], e["step"]) for e in restores] == [(replacement, HOME, saved_home)]


def test_nothing_half_restored_is_resumed_from(run: Run) -> None:
    """The powered-off instance's disk holds no checkpoint a start would take, and it published nothing; the
    replacement resumed from the step whole, as home's manifest describes it (a restore verifies it)."""
    scenario = run.scenario
    killed, replacement = instances_in(scenario, HIGH)
    folder = scenario.player.instances[killed].checkpoint_dir
    assert folder is not None
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []
    assert layouts.newest_complete(folder, writer_done=True, strict=True) is None, left
    high = store(scenario, HIGH)
    by_killed = [e["kind"] for e in high.events() if e.get("instance") == killed]
    assert EventKind.RESUME not in by_killed and EventKind.REGION_RESTORE not in by_killed, by_killed
    resumed = [e for e in high.events(EventKind.RESUME) if e.get("instance") == replacement]
    assert [e["step"] for e in resumed] == [store(scenario, HOME).latest_step()]


def test_each_restore_moved_at_most_its_steps_size_and_a_fraction_across_regions(run: Run) -> None:
    """Measured twice: by the agent (its region_restore event, which the report shows) and by the network (the
    eu-west-1 proxy's count of the bytes each instance moved across regions until it resumed, or lost power)."""
    scenario, watch = run.scenario, run.watch
    killed, replacement = instances_in(scenario, HIGH)
    (crossing,) = build_report(scenario.player, None).cross_region_restores
    assert crossing["instance"] == replacement and 0 < crossing["bytes"] <= 1.05 * watch.size, (crossing, watch)
    assert watch.size <= watch.crossed[replacement] <= 1.05 * watch.size, watch
    assert watch.crossed[killed] <= 1.05 * watch.size


def test_the_iam_replay_saw_the_cross_region_restore_through_the_proxy(run: Run) -> None:
    scenario = run.scenario
    places = {place.region: place for place in scenario.deployment.every_region()}
    home = store(scenario, HOME)
    step_files = f"arn:aws:s3:::{places[HOME].bucket}/{home.step_prefix(int(home.latest_step() or 0))}"
    decisions = of_stack(scenario.cloud.iam_decisions, scenario.cloud.client("iam"), places[HIGH].stack)
    reads = [d for d in decisions if d.action == "s3:GetObject" and d.resource.startswith(step_files)]
    assert len(reads) >= 2 and all(d.decision == ALLOWED for d in reads), reads  # the killed restore's and the next
    assert all(d.decision == ALLOWED for d in decisions)
