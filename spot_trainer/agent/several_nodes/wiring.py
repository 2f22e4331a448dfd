"""Several nodes as one, built from what the agent hands every mode: the world torchrun forms, this node's
part in its rounds, the restore and endings of several, and, in a job of several regions, the fence that
lets only the world in the job's region publish."""

from __future__ import annotations

from ...storage.s3.job_regions import parse_job_buckets
from ...storage.steps.remote import RemoteStore
from ..instance.imds import ImdsClient
from ..node.mode import NodeSetup
from .endings import SeveralEndings
from .mode import SeveralNodes
from .region_fence import RegionFence
from .restore import SeveralRestore
from .round_failures import RoundFailures
from .round_part import RoundPart
from .world import World


def build(setup: NodeSetup, imds: ImdsClient, other_regions: dict[str, RemoteStore], *, started_at: float,
          instance_id: str) -> SeveralNodes:
    """`other_regions`: the job's buckets in its other regions; `started_at`: a peer's ending counts from here."""
    config, store, telemetry, stop = setup.config, setup.store, setup.telemetry, setup.stop_requested
    world = World(config, store, imds, stop, telemetry.log, setup.elsewhere)
    rounds = RoundPart(RoundFailures(config.restart_budget), telemetry, stop, config.poll_seconds)
    endings = SeveralEndings(config, store, telemetry, setup.group, stop, world, setup.notices, started_at,
                             instance_id)
    if (regions := parse_job_buckets(config.job_buckets)) is not None:  # several regions: one world publishes
        home = store if regions.home == config.region else other_regions[regions.home]
        store.publish_fence = RegionFence(home, regions.home, config.region, telemetry.log).why_fenced
    return SeveralNodes(config, store, telemetry, stop, world, rounds, setup.restore(SeveralRestore), endings)
