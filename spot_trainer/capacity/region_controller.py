"""The regions controller: a Lambda in the home region, run each minute, that keeps a job of several regions
where spot capacity is. It reads every region's group (instances running, failed launches), the job's one
cached placement score, each region's cached spot price and where the newest checkpoint lies, decides with
`regions.moves.decide`, and applies a move: the old region's group to 0, the new one's to the job's nodes, an
event in the job's log and a notification.

At most one region launches: the region whose group wants instances is the active one, and any other group
found wanting some (a stack update re-applies each template's desired capacity) is set back to 0.

Its code is the runtime's own wheel (stdlib and boto3, which Lambda's Python has), so the controller and the
benchmark decide with the same functions.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import boto3

from ..aws_names import regional_bucket_name
from ..storage.s3.latest_record import LatestRecord
from .on_demand_handover import hand_over, reason_to_hand_over
from .policy import parse_duration
from .regions.groups import RegionGroup, desired_capacity, move, observe, set_back
from .regions.moves import Action, JobPlace, Move, MoveRules, RegionDecision, decide
from .regions.observations import RegionObservation, failures_since_success
from .regions.place_record import RECORD_NAME, PlaceRecord, RegionSeen
from .regions.placement_scores import ScoreCache, ScoreRequest
from .regions.spot_prices import PriceCache


@dataclass(frozen=True)
class ControllerSetup:
    """The function's environment, as the home stack sets it."""

    job: str
    regions: tuple[str, ...]  # home first
    account: str
    group: str  # the same name in every region
    nodes: int
    region_wait: float
    instance_types: tuple[str, ...]
    topic_arn: str
    pace: float = 1.0  # LOCAL_PACE: the local spot cloud's time runs this many times faster (backoffs, polls)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ControllerSetup:
        return cls(job=env["JOB"], regions=tuple(env["REGIONS"].split(",")), account=env["ACCOUNT"],
                   group=env["GROUP_NAME"], nodes=int(env["NODES"]), region_wait=parse_duration(env["REGION_WAIT"]),
                   instance_types=tuple(t.strip() for t in env["INSTANCE_TYPES"].split(",") if t.strip()),
                   topic_arn=env.get("TOPIC_ARN", ""), pace=float(env.get("LOCAL_PACE") or 1.0))

    def bucket(self, region: str) -> str:
        return regional_bucket_name(self.job, region, self.account)

    @property
    def rules(self) -> MoveRules:
        defaults = MoveRules(region_wait=self.region_wait)
        return replace(defaults, backoff_seconds=defaults.backoff_seconds / self.pace,
                       retry_after_seconds=defaults.retry_after_seconds / self.pace)

    @property
    def home(self) -> str:
        return self.regions[0]

    @property
    def record_key(self) -> str:
        return f"{self.job}/{RECORD_NAME}"


Clients = Any  # a function (service, region) -> a boto3 client


def handler(event: Any, context: Any) -> str:
    setup = ControllerSetup.from_env(os.environ)
    outcome = tick(setup, lambda service, region: boto3.client(service, region_name=region), time.time())
    print(outcome)
    return outcome


def tick(setup: ControllerSetup, clients: Clients, now: float) -> str:
    """One minute's look and decision; the line it logs."""
    s3 = clients("s3", setup.home)
    record, note = _read_record(s3, setup)
    groups = {region: RegionGroup(region, setup.group, clients("autoscaling", region)) for region in setup.regions}
    wanted = {region: desired_capacity(group) for region, group in groups.items()}
    active = _active_region(record, wanted, setup)
    for stray in (r for r, count in wanted.items() if r != active and count):
        set_back(groups[stray])  # at most one region launches
    if record is None or record.active != active:
        record = PlaceRecord(active=active, active_since=now, moves=record.moves if record else ())
    cache = ScoreCache(ScoreRequest.for_job(setup.instance_types, setup.nodes, setup.regions),
                       asked_at=record.scores_asked_at, scores=record.scores, limited=record.scores_limited,
                       pace=setup.pace)
    scores = cache.current(clients("ec2", setup.home), now) or {}
    price_cache = PriceCache(setup.instance_types, record.prices_asked_at, record.prices, setup.pace)
    prices, unread = price_cache.current(lambda region: clients("ec2", region), setup.regions, now)
    note += "".join(f"{line}. " for line in unread)
    record = replace(record, scores_asked_at=cache.asked_at, scores=cache.scores, scores_limited=cache.limited,
                     prices_asked_at=price_cache.asked_at, prices=price_cache.prices)  # kept while paused too
    if not wanted[active]:  # paused by the user, or done: the job wants no instance anywhere, nothing to move
        record = replace(record, reason=f"the job wants no instance in {active} (paused or ended): nothing to move")
        s3.put_object(Bucket=setup.bucket(setup.home), Key=setup.record_key, Body=record.to_json())
        return f"{note}{Action.STAY}: {record.reason}"
    idle_since = max(record.active_since, record.last_running_at or 0.0)
    seen = {region: _observe(group, wanted[region], scores.get(region), prices.get(region),
                             idle_since if region == active else None) for region, group in groups.items()}
    running = seen[active].running > 0
    place = JobPlace(setup.regions, active, record.moves, now if running else record.last_running_at,
                     _checkpoint_region(clients, setup))
    decision = decide(place, seen, setup.rules, now)
    record = replace(record, last_running_at=place.last_running_at, reason=decision.reason,
                     regions={r: _seen_line(wanted[r], seen[r], setup.bucket(r)) for r in setup.regions})
    handed = ""
    if decision.action is Action.MOVE:
        record = _moved(setup, clients, record, decision, now)
        # Written before the new region's group launches: the nodes of a world left in the old region read it
        # before each publish (spot_trainer/agent/several_nodes/region_fence.py), so they publish nothing the new
        # world misses.
        s3.put_object(Bucket=setup.bucket(setup.home), Key=setup.record_key, Body=record.to_json())
        move(groups[active], groups[decision.region], setup.nodes)
    elif decision.action is Action.ON_DEMAND:
        handed = _on_demand(setup, clients, active, record.last_running_at or record.active_since, now)
    s3.put_object(Bucket=setup.bucket(setup.home), Key=setup.record_key, Body=record.to_json())
    return f"{note}{decision.action}: {decision.reason}{handed}"


def _read_record(s3: Any, setup: ControllerSetup) -> tuple[PlaceRecord | None, str]:
    try:
        body = s3.get_object(Bucket=setup.bucket(setup.home), Key=setup.record_key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None, ""
    try:
        return PlaceRecord.from_json(body), ""
    except ValueError as error:  # rewritten below: only the moves' history and the scores' age are lost
        return None, f"{error}; written anew. "


def _active_region(record: PlaceRecord | None, wanted: Mapping[str, int | None], setup: ControllerSetup) -> str:
    """The region whose group wants instances (the record's own first, then home's order); with none, the
    record's, else home (a paused job: nothing to move)."""
    wanting = [r for r in setup.regions if wanted[r]]
    if record is not None and record.active in setup.regions and (record.active in wanting or not wanting):
        return record.active
    return wanting[0] if wanting else setup.home


def _observe(group: RegionGroup, wanted: int | None, score: int | None, price: float | None,
             idle_since: float | None) -> RegionObservation:
    if wanted is None:  # its stack is not deployed: a failure of the configuration kind, so never a target
        missing = failures_since_success([{"StatusCode": "Failed", "StatusMessage": f"no group {group.name}"}])
        return RegionObservation(group.region, failures=missing, score=score, spot_price=price)
    return observe(group, idle_since=idle_since, score=score, spot_price=price)


def _checkpoint_region(clients: Clients, setup: ControllerSetup) -> str | None:
    """The region whose bucket's latest.json names the highest step (None before the first)."""
    best: tuple[int, str] | None = None
    for region in setup.regions:
        s3 = clients("s3", region)
        try:
            body = s3.get_object(Bucket=setup.bucket(region), Key=f"{setup.job}/latest.json")["Body"].read()
            step = LatestRecord.from_json(body).step
        except s3.exceptions.NoSuchKey:
            continue
        except ValueError:
            continue  # a damaged pointer names no checkpoint here; the agent says so where it restores
        if best is None or step > best[0]:
            best = (step, region)
    return best[1] if best else None


def _seen_line(wanted: int | None, seen: RegionObservation, bucket: str) -> RegionSeen:
    newest = seen.failures.newest
    failure = f"{seen.failures.last_code} ({newest})" if newest is not None else ""
    return RegionSeen(desired=wanted or 0, running=seen.running, score=seen.score, failure=failure, bucket=bucket)


def _moved(setup: ControllerSetup, clients: Clients, record: PlaceRecord, decision: RegionDecision,
           now: float) -> PlaceRecord:
    """The move's event in the job's log, its notification, and the record's new active region."""
    source = record.active
    move_made = Move(now, source, decision.region, decision.reason)
    # "region" is EventKind.REGION: this room imports no storage module (as watch.py writes "market")
    _record_event(clients("s3", setup.home), setup, "region", now, {"from": source, "to": decision.region,
                                                                     "reason": decision.reason})
    _notify(setup, clients, "moved", f"moved from {source} to {decision.region}: {decision.reason}")
    return replace(record, active=decision.region, active_since=now, moves=(*record.moves, move_made))


def _on_demand(setup: ControllerSetup, clients: Clients, active: str, since: float, now: float) -> str:
    """Today's on-demand rules in the active region; the line's tail when they switched its group."""
    autoscaling = clients("autoscaling", active)
    reason = reason_to_hand_over(autoscaling, clients("s3", active), bucket=setup.bucket(active), job=setup.job,
                                 group=setup.group, since=since, now=now)
    if reason is None:
        return ""
    hand_over(autoscaling, setup.group)
    # "market" is EventKind.MARKET: this room imports no storage module (as watch.py writes it)
    _record_event(clients("s3", setup.home), setup, "market", now, {"from": "spot", "to": "on-demand",
                                                                     "region": active, "reason": reason})
    _notify(setup, clients, "on-demand", f"switched to on-demand in {active}: {reason}")
    return f"; {active} switched to on-demand: {reason}"


def _notify(setup: ControllerSetup, clients: Clients, what: str, line: str) -> None:
    if setup.topic_arn:
        clients("sns", setup.home).publish(TopicArn=setup.topic_arn, Subject=f"Spot Trainer {setup.job}: {what}",
                                           Message=f"Job {setup.job} {line}.")


def _record_event(s3: Any, setup: ControllerSetup, kind: str, at: float, fields: dict[str, Any]) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
    event = {"kind": kind, "time": stamp, "epoch": at, "instance": "regions-controller", **fields}
    s3.put_object(Bucket=setup.bucket(setup.home), Key=f"{setup.job}/events/{stamp}-regions-controller-{kind}.json",
                  Body=json.dumps(event).encode())
