"""The report at the end of a local run: what was trained, what interruptions cost, and what the
same run would have cost on spot versus on demand.

Cost: the same computation as `python -m spot_trainer status` (spot_trainer/costs) over the instance
records the agents wrote to S3 (moto) and the job's events, billed per second with no minimum (a
local run is time scaled down). Spot prices come from a price trace; without one, a flat trace at
(1 − discount) of the on-demand price. Two comparisons, not to be confused: the same instance-hours
on demand (the discount the job got), and the same job run once, uninterrupted, on demand: one boot
plus every step once at the step time measured here, on as many nodes as trained together (what spot
saved, boots and redone work included).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from localcloud import region_lines
from localcloud.boots import boot_line, replacement_phrase
from localcloud.instance import Instance
from localcloud.interruptions import Interruption, InterruptionPlan
from localcloud.journal import TrainingLog, training_again_after
from localcloud.lost_work import held_on_disk, lost_phrase, lost_steps
from localcloud.player import Player
from localcloud.work import logged_work
from spot_trainer.agent.records.boot_times import boot_rows
from spot_trainer.costs.instance_records import InstanceLife, read_records
from spot_trainer.costs.job_cost import JobCost, job_cost
from spot_trainer.costs.on_demand_prices import USD_PER_HOUR
from spot_trainer.costs.spot_prices import SpotPriceSource, flat_trace
from spot_trainer.storage.checkpoint_versions import step_text
from spot_trainer.storage.record_kinds import EventKind, JobState
from spot_trainer.storage.steps.remote import RemoteStore

DEFAULT_DISCOUNT = 0.70


@dataclass
class Report:
    job: str
    state: str
    reason: str
    steps: int | None
    total_steps: int | None
    final_checkpoint_step: int | None
    interruptions: int
    announced: int
    hard_kills: int
    completed_steps_lost: int | None  # None: not known (the script prints no step and left no checkpoint)
    steps_computed: int  # each step of a world of nodes once
    progress_from: str  # progress_source(): "steps", "checkpoints", "versions" or "nothing"
    checkpoint_stall_seconds: float | None  # None: the command does not report how long saves stall it
    training_seconds: float
    checkpoint_overhead: float | None  # stall ÷ training time
    wall_seconds: float
    instances: int
    instance_type: str
    instance_seconds: float
    boot_seconds: float  # launch → first step, of the first instance that trained
    on_demand_equivalent_seconds: float
    useful_work_fraction: float  # on-demand-equivalent time ÷ instance time
    spot_discount: float
    on_demand_usd_per_hour: float
    spot_cost_usd: float  # what the run cost: its spot instances at the trace's prices (and any on-demand ones)
    on_demand_cost_usd: float  # the same job run once, uninterrupted, on demand
    savings: float  # against that uninterrupted on-demand run
    on_demand_same_hours_usd: float  # the instance-hours this run used, at on-demand prices
    savings_same_hours: float | None  # against those: the discount the run got
    redone_steps: int  # as `status` sees them: events and instance records
    redone_cost_usd: float | None
    price_source: str
    instances_without_record: int  # priced from the player's own view: their agent wrote no record
    agents_without_record: int = 0  # of those, how many had an agent that started (its events show it) and ended
    interruptions_planned: int = 0  # scheduled by --interruptions and --hard-kill (a --rate plans none)
    interrupt_every_seconds: float | None = None  # the schedule's spacing when the total steps are unknown
    events: list[dict[str, Any]] = field(default_factory=list)
    market_switches: list[dict[str, Any]] = field(default_factory=list)  # the group's spot/on-demand changes
    steps_redone: int = 0  # as the journals show them: every step a node printed
    nodes_together: int = 1  # the most nodes that trained as one world
    final_outputs: str = ""  # what the finished command left beside its checkpoints, and where it is kept
    boots: list[dict[str, Any]] = field(default_factory=list)  # each instance's launch → first step (boots.py)
    completed_steps_lost_text: str = ""  # the figure and how it is known: measured, a lower bound, or unknown
    region_moves: list[dict[str, Any]] = field(default_factory=list)  # a job of several regions: its moves
    cross_region_restores: list[dict[str, Any]] = field(default_factory=list)  # and the steps that crossed

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def _recoveries(self) -> str:
        """', training again after 12.3s, 31.0s': one figure per interruption, in order."""
        seconds = [event.get("recovery_seconds") for event in self.events]
        shown = [f"{value:.1f}s" if value is not None else "never" for value in seconds]
        seen = "" if self.progress_from == "steps" else " (to the first checkpoint after it)"
        return f", training again after {', '.join(shown)}{seen}" if shown else ""

    def _latest_shown(self) -> str:
        step = self.final_checkpoint_step
        return step_text(step).removeprefix("step ") if step is not None else "None"

    def _computed_shown(self) -> str:
        if self.progress_from == VERSIONS and not self.steps_computed:
            return "unknown (the checkpoints state no step: they go by the time they were written)"
        return f"{self.steps_computed} (redone: {self.steps_redone})"

    def text(self) -> str:
        steps = f"{self.steps}" + (f"/{self.total_steps}" if self.total_steps else "")
        lines = [
            f"job {self.job}: {self.state}" + (f" ({self.reason})" if self.reason else ""),
            f"  steps                  {steps} (latest checkpoint in S3: {self._latest_shown()})",
            f"  interruptions          {self.interruptions} ({self.announced} announced, "
            f"{self.hard_kills} without notice)" + self._recoveries()
            + unfired_phrase(self.interruptions_planned, self.interruptions, self.interrupt_every_seconds,
                             self.state, showed_progress=self.progress_from != NO_PROGRESS),
            f"  completed steps lost   {self.completed_steps_lost_text or self.completed_steps_lost}",
            f"  steps computed         {self._computed_shown()}"
            + (f" by up to {self.nodes_together} nodes as one" if self.nodes_together > 1 else "") + self._unseen(),
            "  checkpoint overhead    " + self._overhead(),
            f"  wall time              {self.wall_seconds:.1f}s on {self.instances} instances "
            f"({self.instance_seconds:.1f} instance-seconds, boot {self.boot_seconds:.1f}s)",
            f"  useful work            {self.useful_work_fraction:.1%} of instance time",
            f"  cost ({self.instance_type})  ${self.spot_cost_usd:.5f} for {self.instance_seconds / 3600:.4f} "
            f"instance-hours ({self.price_source}); the same hours on demand ${self.on_demand_same_hours_usd:.5f}"
            + (f": {self.savings_same_hours:.1%} less" if self.savings_same_hours is not None else ""),
            f"  vs on-demand run       ${self.on_demand_cost_usd:.5f} for the job once, uninterrupted, "
            "on demand: " + savings_phrase(self.savings, self._discount_got()),
            "  redone work cost       " + (f"${self.redone_cost_usd:.5f}" if self.redone_cost_usd is not None
                                           else "-") + f" for {self.redone_steps} steps redone as the events "
            "and instance records show them (what `status` reports)",
        ]
        for switch in self.market_switches:
            lines.append(f"  market switch          {switch['from']} → {switch['to']} after "
                         f"{switch['after_seconds']:.0f}s by {switch['by']}: {switch['reason']}")
        lines += region_lines.lines(self.region_moves, self.cross_region_restores)
        lines += [boot_line(row) for row in self.boots]
        if phrase := replacement_phrase(self.boots):
            lines.append(phrase)
        if self.final_outputs:
            lines.append(f"  final outputs          {self.final_outputs}")
        if never := self.instances_without_record - self.agents_without_record:
            lines.append(f"  note                   {never} instances wrote no record (their agent never started): "
                         "billed from launch to power-off as the player saw them")
        if self.agents_without_record:
            lines.append(f"  note                   {self.agents_without_record} instances' agents started and ended "
                         "before writing their record (the job's state says why): billed from launch to power-off "
                         "as the player saw them")
        return "\n".join(lines)

    def _overhead(self) -> str:
        if self.checkpoint_overhead is None:
            return "not measured (the command does not report how long a save stalls it)"
        summed = " summed over the nodes" if self.nodes_together > 1 else ""
        return (f"{self.checkpoint_overhead:.2%} ({self.checkpoint_stall_seconds:.2f}s stalled in "
                f"{self.training_seconds:.1f}s of training{summed})")

    def _discount_got(self) -> float:
        return self.savings_same_hours if self.savings_same_hours is not None else self.spot_discount

    def _unseen(self) -> str:
        if self.progress_from == "steps":
            return ""
        return " (counted from checkpoints: the command prints no steps, so steps after its last save are unseen)"


NO_PROGRESS, VERSIONS = "nothing", "versions"


def progress_source(logs: list[TrainingLog]) -> str:
    """What the run's progress was seen from: "steps" (the command printed them), "checkpoints" (its saves
    stated theirs), VERSIONS (its saves state none) or NO_PROGRESS (nothing at all: no figure is known)."""
    if any(log.reports_steps for log in logs):
        return "steps"
    if any(log.max_step is not None for log in logs):
        return "checkpoints"
    return VERSIONS if any(log.versions_seen for log in logs) else NO_PROGRESS


def unfired_phrase(planned: int, happened: int, every_seconds: float | None, state: str = JobState.DONE, *,
                   showed_progress: bool = True) -> str:
    """'; 2 of the 2 planned never came: ...': a demo asked for interruptions that the job outran must
    not read as a run that survived them. Spacing them closer helps only a job that ended DONE first: one
    that failed says why on the report's first line."""
    if happened >= planned:
        return ""
    if state != JobState.DONE:
        return f"; {planned - happened} of the {planned} planned never came: the job was {state} first"
    why = "the job ended first"
    if not showed_progress:
        return (f"; {planned - happened} of the {planned} planned never came: {why}, and it never showed progress "
                "(no step line, no checkpoint the agent recognised), so its schedule counted from its start")
    if every_seconds is not None:
        why += (f" (a command that prints no total steps is interrupted after each {every_seconds:g}s of "
                "training: lower --interrupt-every)")
    return f"; {planned - happened} of the {planned} planned never came: {why}"


def savings_phrase(savings: float, discount: float) -> str:
    """The comparison with the same job run once, uninterrupted, on demand, in words: a negative
    percentage ("-278% saved") reads like a bug, a ratio and its cause do not."""
    if savings >= 0:
        return f"{savings:.1%} saved"
    return (f"{1 - savings:.2f}x the on-demand run: boots and redone work cost more than the "
            f"{discount:.0%} discount saves on a run this short")


def build_report(player: Player, status: dict[str, Any] | None, discount: float = DEFAULT_DISCOUNT,
                 prices: SpotPriceSource | None = None) -> Report:
    """`prices`: a price trace (TracePrices); None: every type at (1 − discount) of its on-demand price."""
    status = status or {}
    logs = list(player.logs.values())
    instances = list(player.instances.values())
    stall = sum(log.stall_seconds for log in logs)
    stall_measured = any(log.stall_measured for log in logs)
    work = logged_work(logs)
    # The work the run did, priced as one uninterrupted run: every step for a job that finished, the steps
    # it reached for one that stopped before its end (at its budget, or failed).
    total = status.get("step") or player.options.total_steps or player.current_step() or 0
    first = instances[0] if instances else None
    # Boot time of an uninterrupted run: launch to first step of the first instance that trained.
    trained = [(i, player.logs[i.instance_id].first_step_at) for i in instances]
    boot = next((at - i.launched_at for i, at in trained if at is not None), 0.0)
    nodes = max(1, work.nodes_together)
    equivalent = nodes * (boot + work.seconds_per_step * total)
    kind = first.instance_type if first else "c7i.xlarge"
    price = USD_PER_HOUR.get(kind, USD_PER_HOUR["c7i.xlarge"])
    cost, unrecorded = run_cost(player, prices or flat_prices(discount))
    events = job_events(player)
    with_agent = {str(event.get("instance")) for event in events}
    instance_seconds = cost.instance_hours * 3600
    spot_cost = cost.cost_usd
    on_demand_cost = equivalent / 3600 * price
    records = player.interruptions
    losses = [lost_steps(r, player.logs[r.instance], held_on_disk(player.instances[r.instance].checkpoint_dir))
              for r in records]
    return Report(
        job=player.deployment.job,
        state=str(status.get("state", "UNKNOWN")),
        reason=str(status.get("reason") or ""),
        steps=status.get("step") if status.get("step") is not None else player.current_step(),
        total_steps=player.options.total_steps,
        final_checkpoint_step=player.latest_step(),
        interruptions=len(records),
        announced=sum(1 for r in records if r.kind == "announced"),
        hard_kills=sum(1 for r in records if r.kind == "hard-kill"),
        completed_steps_lost=None if any(loss.steps is None for loss in losses) else sum(
            loss.steps or 0 for loss in losses),
        completed_steps_lost_text=lost_phrase(losses),
        steps_computed=work.steps_computed,
        progress_from=progress_source(logs),
        checkpoint_stall_seconds=round(stall, 4) if stall_measured else None,
        training_seconds=round(work.node_seconds, 2),
        checkpoint_overhead=(round(stall / work.node_seconds, 5) if work.node_seconds else 0.0)
        if stall_measured else None,
        wall_seconds=round(player.ended_at - player.started_at, 2),
        instances=len(instances),
        instance_type=kind,
        instance_seconds=round(instance_seconds, 2),
        boot_seconds=round(boot, 2),
        on_demand_equivalent_seconds=round(equivalent, 2),
        useful_work_fraction=round(equivalent / instance_seconds, 4) if instance_seconds else 0.0,
        spot_discount=discount,
        on_demand_usd_per_hour=price,
        spot_cost_usd=round(spot_cost, 6),
        on_demand_cost_usd=round(on_demand_cost, 6),
        savings=round(1 - spot_cost / on_demand_cost, 4) if on_demand_cost else 0.0,
        on_demand_same_hours_usd=round(cost.on_demand_same_hours_usd, 6),
        savings_same_hours=round(cost.savings_fraction, 4) if cost.savings_fraction is not None else None,
        redone_steps=cost.redone_steps,
        redone_cost_usd=round(cost.redone_cost_usd, 6) if cost.redone_cost_usd is not None else None,
        price_source=cost.price_source,
        instances_without_record=len(unrecorded),
        agents_without_record=len(set(unrecorded) & with_agent),
        interruptions_planned=planned_interruptions(player.options.plan),
        interrupt_every_seconds=None if player.options.total_steps else player.options.plan.spacing_seconds,
        events=[{**asdict(r), "lost_steps": loss.steps, "lost_steps_basis": str(loss.basis),
                 "recovery_seconds": recovery_seconds(r, logs)} for r, loss in zip(records, losses, strict=True)],
        market_switches=market_switches(player, events),
        steps_redone=work.redone,
        nodes_together=nodes,
        final_outputs=final_outputs(events),
        boots=boot_rows(events),
        region_moves=region_lines.region_moves(events, player.started_at),
        cross_region_restores=region_lines.crossings(events),
    )


def planned_interruptions(plan: InterruptionPlan) -> int:
    """How many interruptions the schedule asked for; a Poisson rate promises no number."""
    return 0 if plan.rate_per_hour is not None else plan.count + plan.hard_kills


def job_events(player: Player) -> list[dict[str, Any]]:
    """The job's events, from every region's bucket, in time order."""
    events = [event for store in job_stores(player) for event in store.events()]
    return sorted(events, key=lambda event: float(event.get("epoch") or 0.0))


def job_stores(player: Player) -> list[RemoteStore]:
    """The job's store in each of its regions, home first."""
    return [RemoteStore(player.cloud.client("s3", place.region), place.bucket, place.job)
            for place in player.deployment.every_region()]


def market_switches(player: Player, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every switch of the job's group between spot and on-demand, as its events record it."""
    return [{"after_seconds": round(float(event["epoch"]) - player.started_at, 1), "from": event.get("from"),
             "to": event.get("to"), "by": event.get("instance"), "reason": event.get("reason")}
            for event in events if event.get("kind") == EventKind.MARKET]


def final_outputs(events: list[dict[str, Any]]) -> str:
    """'4 files (0.5 MB) kept in s3://…/final/' from the agent's event, or '' when it kept none."""
    if not (kept := [event for event in events if event.get("kind") == EventKind.FINAL_OUTPUTS]):
        return ""
    last = kept[-1]
    return f"{last.get('files')} files ({int(last.get('bytes') or 0) / 1e6:.1f} MB) kept in {last.get('location')}"


def flat_prices(discount: float) -> SpotPriceSource:
    """The local cloud's default trace: every type at (1 − discount) of its on-demand price, always."""
    return flat_trace({name: usd * (1 - discount) for name, usd in USD_PER_HOUR.items()},
                      f"flat trace: {1 - discount:.0%} of the on-demand price")


def run_cost(player: Player, prices: SpotPriceSource) -> tuple[JobCost, list[str]]:
    """The run's cost from the records the agents wrote, and the instances that had none (killed before
    their agent started, or whose agent ended first: billed all the same, from the player's own view)."""
    stores = job_stores(player)
    lives = [life for store in stores for life in read_records(store)[0]]
    recorded = {life.instance for life in lives}
    region = player.cloud.aws_env.get("AWS_DEFAULT_REGION", "us-east-1")
    missing = [as_life(i, region) for i in player.instances.values() if i.instance_id not in recorded and i.launched_at]
    cost = job_cost([*lives, *missing], job_events(player), prices, now=player.ended_at, job_running=False,
                    minimum_seconds=0.0)
    return cost, [life.instance for life in missing]


def as_life(instance: Instance, region: str) -> InstanceLife:
    end = instance.ended_at if instance.ended_at is not None else instance.launched_at
    az = instance.imds.availability_zone if instance.imds is not None else region + "a"
    return InstanceLife(instance=instance.instance_id, instance_type=instance.instance_type, az=az,
                        market=instance.market, launched_at=instance.launched_at, last_seen=end, stopped_at=end)


def recovery_seconds(interruption: Interruption, logs: list[TrainingLog]) -> float | None:
    """From the notice (or the kill) to the first step after the next resume: how long training
    stood still, whoever took it up (a replacement, or the surviving nodes of a world)."""
    again = training_again_after(logs, interruption.at)
    return round(again - interruption.at, 2) if again is not None else None
