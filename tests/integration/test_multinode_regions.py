"""A two-node FSDP2 + DCP job of several regions moves: both nodes in home power off after home's bucket holds a
sharded step, and two nodes start in another region, whose bucket holds nothing. Every node of their first round
resumes that step, each fetching its share from home's bucket, across regions; the job trains on from it, saves
in its own region's bucket and ends DONE there, and home's bucket is never written again."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from spot_trainer.storage.s3.job_keys import MANIFEST
from tests.integration.lost_nodes import TIMEOUT, every_node_finishes, held, wait_while_progressing
from tests.integration.region_buckets import AWAY, HOME, RegionBuckets, region_buckets
from tests.integration.test_multinode import cluster, train_a_while
from tests.integration.test_multinode_sharded import FSDP_DCP, whole_in_s3

pytestmark = TIMEOUT

STEPS, MOVED_AT = 40, 20


def moved_to(made: RegionBuckets, job: str, region: str) -> None:
    """The regions controller's record of a move, written in home's bucket before the new region launches."""
    made.clients[HOME].put_object(Bucket=made.buckets[HOME], Key=f"{job}/regions.json",
                                  Body=json.dumps({"active": region, "active_since": time.time()}).encode())


def test_a_sharded_step_follows_a_two_node_job_to_another_region(aws_env: dict[str, str], tmp_path: Path) -> None:
    job = "fsdp-moving"
    made = region_buckets(aws_env, job, "fsdp")
    buckets, clients, stores = made.buckets, made.clients, made.stores
    every = {"job_buckets": made.job_buckets, "min_nodes": "2", "max_nodes": "2", "restart_budget": "2"}
    # A model four times the fixture's default, so its shards outweigh DCP's .metadata as a real model's do.
    script = f"{sys.executable} {FSDP_DCP} --steps {STEPS} --save-every 10 --step-seconds 0.05 --width 128"

    # Home trains until its bucket holds step MOVED_AT, held there, and both its nodes power off.
    with cluster({**aws_env, "AWS_DEFAULT_REGION": HOME}, buckets[HOME], job, tmp_path / "home", nodes=2,
                 command=held(script, tmp_path / "gates", MOVED_AT), region=HOME, **every) as home:
        wait_while_progressing(home, stores[HOME], lambda: (stores[HOME].latest_step() or 0) >= MOVED_AT,
                               f"home never published step {MOVED_AT}")
        for agent in home.agents:
            agent.kill_tree()
    assert stores[HOME].latest_step() == MOVED_AT
    moved_to(made, job, AWAY)
    home_objects = sorted(o["Key"] for o in clients[HOME].list_objects_v2(Bucket=buckets[HOME])["Contents"])
    files = stores[HOME].get_json(stores[HOME].step_prefix(MOVED_AT) + MANIFEST, absolute=True)["files"]
    step_size = sum(int(entry["size"]) for entry in files.values())
    shared = sum(int(entry["size"]) for key, entry in files.items() if not key.endswith(".distcp"))

    with cluster({**aws_env, "AWS_DEFAULT_REGION": AWAY}, buckets[AWAY], job, tmp_path / "away", nodes=2,
                 command=script, region=AWAY, **every) as away:
        every_node_finishes(away, stores[AWAY])
        # Each node's rounds, in order: on a loaded machine a round formed again once after the last step.
        starts = [[line for line in agent.lines if line.startswith("fsdp: start at step")] for agent in away.agents]
        logs = "\n\n".join(agent.text() for agent in away.agents)

    assert stores[AWAY].get_json("status.json")["state"] == "DONE", logs
    assert stores[AWAY].latest_step() == STEPS
    whole_in_s3(stores[AWAY], STEPS, tmp_path / "fresh")
    # The first round's ranks load home's step: nothing home published is trained again, nothing restarts at 0.
    assert all(rounds and rounds[0].startswith(f"fsdp: start at step {MOVED_AT},") for rounds in starts), starts
    assert not [line for rounds in starts for line in rounds if line.startswith("fsdp: start at step 0,")], starts
    # Home's bucket is left as it was: the saves after the move go to the region the job runs in.
    assert sorted(o["Key"] for o in clients[HOME].list_objects_v2(Bucket=buckets[HOME])["Contents"]) == home_objects
    crossed = [event for event in stores[AWAY].events() if event["kind"] == "region_restore"]
    assert crossed and {(event["region"], event["step"]) for event in crossed} == {(HOME, MOVED_AT)}, crossed
    # Each node brought its ranks' shards and the step's shared files (.metadata), once: every shard crossed once.
    assert sum(event["bytes"] for event in crossed) == step_size + shared, (crossed, step_size, shared)
    assert step_size + shared <= 1.05 * step_size


def test_a_world_left_in_a_region_the_job_moved_from_publishes_nothing_more(
    aws_env: dict[str, str], tmp_path: Path
) -> None:
    """The controller records a move in home's regions.json before the new region's group launches; from then on
    the world still training in home (its group not yet scaled in) publishes no step the new world would miss."""
    job = "fenced"
    made = region_buckets(aws_env, job, "fenced")
    home = made.stores[HOME]
    every = {"job_buckets": made.job_buckets, "min_nodes": "2", "max_nodes": "2"}
    with cluster({**aws_env, "AWS_DEFAULT_REGION": HOME}, made.buckets[HOME], job, tmp_path, nodes=2, held=True,
                 region=HOME, **every) as world:
        world.agents[0].wait_for(lambda: (home.latest_step() or 0) >= 10, timeout=120, what="step 10 in S3")
        moved_to(made, job, AWAY)
        at_the_move = home.latest_step() or 0
        world.release()
        train_a_while(world.agents, step=at_the_move + 20)  # four saves past it
        refused = [line for agent in world.agents for line in agent.lines if f"the job moved to {AWAY}" in line]
        published = home.latest_step() or 0
    assert refused, "\n\n".join(agent.text() for agent in world.agents)
    assert published <= at_the_move + 5, (at_the_move, published)  # at most a publish already past its check
