"""An FSDP2 (`fully_shard`) + torch.distributed.checkpoint script of torchtitan's shape
(tests/fixtures/plain_scripts/fsdp_dcp.py) on three nodes with `min_nodes = 2`: every rank writes its
own shard of `step-<N>/` to its own disk and only rank 0's disk gets `.metadata`. Every node uploads
its shards, a step is published only once every shard its `.metadata` lists is in S3, every node of a
round resumes that whole step — at whatever node count the round has, through DCP's resharding; a round of
two resuming a step three ranks saved fetches, counted at the S3 stand-in, only what its ranks read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from spot_trainer.storage.saves import shards
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.lost_nodes import (
    TIMEOUT,
    every_node_finishes,
    held,
    lose_each_kind_of_node,
    no_lost_node_was_a_failure,
)
from tests.integration.test_multinode import Cluster, cluster, job_store
from tests.support.s3_proxy import FaultProxy

pytestmark = TIMEOUT

STEPS = 90
FSDP_DCP = Path(__file__).resolve().parents[1] / "fixtures" / "plain_scripts" / "fsdp_dcp.py"


def whole_in_s3(store: RemoteStore, step: int, into: Path) -> list[str]:
    """The published step restores whole, every byte as its manifest says, into a fresh folder: its
    `.metadata` and every shard that `.metadata` lists. The shard names."""
    restored = store.restore_at_or_below(into, step)
    assert restored is not None and store.restored_step == step, f"step {step} is published but does not restore"
    listed = shards.listed_in_file(restored / shards.METADATA)
    held = sorted(path.name for path in restored.iterdir())
    assert listed and all((restored / name).is_file() for name in listed), (sorted(listed or ()), held)
    return sorted(listed)


def loads_in_a_fresh_process(checkpoint: Path) -> None:
    """A restored step loads with DCP in a process of its own (one rank, whatever world saved it)."""
    check = textwrap.dedent("""
        import sys
        from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
        dcp_to_torch_save(sys.argv[1], sys.argv[2])
        import torch
        state = torch.load(sys.argv[2], weights_only=False)
        assert set(state) == {"model", "optimizer"}, set(state)
        print("loaded", len(state["model"]))
    """)
    done = subprocess.run([sys.executable, "-c", check, str(checkpoint), str(checkpoint.parent / "whole.pt")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "loaded" in done.stdout, done.stderr


def test_an_fsdp_script_publishes_whole_steps_and_survives_every_kind_of_lost_node(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"fsdp-{bucket[-8:]}"
    store = job_store(aws_env, bucket, job)
    # Held until each loss is in, as S3 reaches steps 20, 40 and 60: DCP's step-<N>/ is whole in S3 once
    # every node has sent its shards, while the ranks wait after that save.
    command = held(f"{sys.executable} {FSDP_DCP} --steps {STEPS} --save-every 10 --step-seconds 0.05",
                   tmp_path / "gates", 20, 40, 60)
    # A budget of 2: on CPU, gloo's worker threads can abort a finalizing interpreter after a round that
    # finished ("terminate called without an active exception"); the agent's restart then resumes the
    # published last step, as it would on AWS, instead of a one-off abort failing the job.
    # The agents reach S3 through a proxy that counts what each GET returned (the test's own reads do not).
    moto_port = int(aws_env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1])
    with FaultProxy(moto_port) as proxy, cluster({**aws_env, "AWS_ENDPOINT_URL": proxy.endpoint}, bucket, job,
                                                 tmp_path, command=command, restart_budget="2") as group:
        shard_sizes: dict[str, int] = {}  # of each step S3 held at a loss (retention removes them later)

        def whole_after_each_loss() -> None:
            if (step := store.latest_step()) is not None:
                whole_in_s3(store, step, tmp_path / "checked" / str(step))
                listed = store.s3.list_objects_v2(Bucket=store.bucket, Prefix=store.step_prefix(step))
                shard_sizes.update({entry["Key"]: entry["Size"] for entry in listed.get("Contents", [])
                                    if entry["Key"].endswith(".distcp")})

        lose_each_kind_of_node(group, store, first=20, gap=20, gates=tmp_path / "gates",
                               after_each=whole_after_each_loss)
        every_node_finishes(group, store)
    assert store.get_json("status.json")["state"] == "DONE"
    assert store.latest_step() == STEPS
    # A shard per rank of the round that saved it: two nodes, or three when a replacement joined in time.
    assert len(whole_in_s3(store, STEPS, tmp_path / "fresh")) == last_round_world(group)
    loads_in_a_fresh_process(tmp_path / "fresh" / f"step-{STEPS}")
    no_lost_node_was_a_failure(group)
    never_from_nothing_once_published(group)
    each_round_resumes_at_the_newest_published_step(group)
    the_smaller_world_fetched_only_what_its_ranks_read(group, store, proxy, shard_sizes)


def last_round_world(group: Cluster) -> int:
    """The world size of the last round that started below the last step, so saved it, from the script's own
    `fsdp: start at step N, world W` (a round formed after it was published starts there and saves nothing)."""
    starts = sorted((at, line) for agent in group.agents for at, line in zip(agent.times, agent.lines, strict=False)
                    if line.startswith("fsdp: start at step")
                    and int(line.removeprefix("fsdp: start at step ").split(",")[0]) < STEPS)
    assert starts, "the script never started below the last step"
    return int(starts[-1][1].rsplit(" world ", 1)[1])


def never_from_nothing_once_published(group: Cluster) -> None:
    """Once a step is published, every round's ranks load a step (at 2 nodes as at 3: DCP reshards)."""
    def published(line: str) -> bool:
        return line.startswith("spot-trainer: checkpoint step") and " uploaded in " in line and "shards" not in line

    first = min(at for agent in group.agents if (at := agent.first_time(published)) is not None)
    starts = [(at, line) for agent in group.agents for at, line in zip(agent.times, agent.lines, strict=False)
              if line.startswith("fsdp: start at step")]
    assert not [line for at, line in starts if at > first and " step 0," in line], starts
    assert any(" world 2" in line for at, line in starts if at > first), starts  # resumed by fewer ranks


def each_round_resumes_at_the_newest_published_step(group: Cluster) -> None:
    """Every round starts at the newest step published before it, or later: nothing in S3 is trained again, so a
    lost node's redone work is what it trained past its last save, less than one save interval (--save-every)."""
    def published(line: str) -> bool:
        return line.startswith("spot-trainer: checkpoint step") and " uploaded in " in line and "shards" not in line

    steps = sorted((at, int(line.removeprefix("spot-trainer: checkpoint step ").split()[0]))
                   for agent in group.agents for at, line in zip(agent.times, agent.lines, strict=False)
                   if published(line))
    starts = [(at, int(line.removeprefix("fsdp: start at step ").split(",")[0]))
              for agent in group.agents for at, line in zip(agent.times, agent.lines, strict=False)
              if line.startswith("fsdp: start at step")]
    behind = [(start, newest) for at, start in starts
              if (newest := max((step for when, step in steps if when < at), default=None)) is not None
              and start < newest]
    assert not behind, f"rounds that started below the newest published step (start, newest): {behind}"


def the_smaller_world_fetched_only_what_its_ranks_read(group: Cluster, store: RemoteStore, proxy: FaultProxy,
                                                      shard_sizes: dict[str, int]) -> None:
    """A round of two nodes resumed a step three ranks saved (the first loss's): until its ranks started, its
    nodes fetched of that step's shards, counted at the S3 stand-in, less than all of them once (each fetched all
    it did not hold until now: 4/3 of them), in ranged GETs (pieces)."""
    starts = sorted((at, int(line.removeprefix("fsdp: start at step ").split(",")[0]))
                    for agent in group.agents for at, line in zip(agent.times, agent.lines, strict=False)
                    if line.startswith("fsdp: start at step") and line.endswith(" world 2")
                    and not line.startswith("fsdp: start at step 0,"))
    saved_by_3 = [(at, step, of_step) for at, step in starts
                  if len(of_step := {key: size for key, size in shard_sizes.items()
                                     if key.startswith(store.step_prefix(step))}) == 3]
    assert saved_by_3, f"no round of two resumed a step three ranks saved: {starts}, {sorted(shard_sizes)}"
    started, step, of_step = saved_by_3[0]
    gets = [(ranged, size) for at, key, ranged, size in proxy.gets if at <= started and key in of_step]
    fetched, whole = sum(size for _, size in gets), sum(of_step.values())
    assert any(ranged for ranged, _ in gets) and fetched < whole, (fetched, whole, gets)
