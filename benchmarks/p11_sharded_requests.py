"""P11: S3 requests per publish and per restore of a sharded checkpoint, at N = 4 to 64 simulated nodes.

Every node is the agent's own code (spot_trainer.storage.steps.step_parts.StepParts, one client each) in this one
process, with its own folder holding one rank's shard of one DCP save (small shards: the figure is the
requests, not the bytes). Node 0 holds `.metadata`, whose storage data places every shard. The nodes send
their parts one after another, as the last of them would finish at once; each then polls once, as its
agent does, until the step is published. Every request goes through a counting proxy in front of one
local moto server. Then one node restores the published step, its requests and bytes counted the same way:
all of it (as every node did before a round until now), and what its ranks read at the same world size
(`.metadata` and its own shard; `bytes_restored_per_node_share`).

    python benchmarks/p11_sharded_requests.py [--nodes 4 8 16 32 64] [--shard-kb 64]

To measure another checkout's code, put a folder holding `spot_trainer` (a link to its `spot_trainer/`) first on
PYTHONPATH: `--label` names it in the output.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import torch
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex

sys.path.append(str(Path(__file__).resolve().parent.parent))

from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.storage.saves.shards import NodeRanks  # noqa: E402
from spot_trainer.storage.steps.checkpoint_restore import restored_in_part  # noqa: E402
from spot_trainer.storage.steps.remote import RemoteStore  # noqa: E402
from spot_trainer.storage.steps.step_parts import StepParts  # noqa: E402
from tests.support.s3_proxy import FaultProxy  # noqa: E402

BUCKET = "p11-sharded"
STEP = 100


def write_save(root: Path, nodes: int, shard_bytes: int) -> list[Path]:
    folders = []
    for rank in range(nodes):
        folder = root / f"node{rank}" / f"step-{STEP}"
        folder.mkdir(parents=True)
        (folder / f"__{rank}_0.distcp").write_bytes(os.urandom(shard_bytes))
        folders.append(folder)
    storage = {MetadataIndex("weight", torch.Size([r, 0])): _StorageInfo(f"__{r}_0.distcp", 0, shard_bytes)
               for r in range(nodes)}  # one item split over every rank, as FSDP saves it
    (folders[0] / ".metadata").write_bytes(pickle.dumps(Metadata(state_dict_metadata={}, storage_data=storage)))
    return folders


def one_run(proxy: FaultProxy, root: Path, nodes: int, shard_bytes: int) -> dict[str, Any]:
    job = f"p11-{nodes}"
    folders = write_save(root / job, nodes, shard_bytes)
    parts = [StepParts(RemoteStore(boto3.client("s3", endpoint_url=proxy.endpoint), BUCKET, job, instance=f"i-{rank}"))
             for rank in range(nodes)]
    before, started = proxy.requests, time.monotonic()
    for rank, folder in enumerate(folders):
        parts[rank].upload(folder, STEP)
    polls = 0
    while parts[0].store.latest_step() != STEP and polls < 10:  # each node's agent polls: publish if whole
        polls += 1
        for each in parts:
            each.publish_if_whole(STEP)
    publish_requests = proxy.requests - before
    published = parts[0].store.latest_step() == STEP
    before = proxy.requests
    restored = parts[1].store.restore_at_or_below(root / job / "restore", STEP)
    restore_requests = proxy.requests - before
    restored_bytes = sum(p.stat().st_size for p in restored.rglob("*") if p.is_file()) if restored else 0
    before = proxy.requests
    share = root / job / "share"
    shared = parts[1].store.restore_at_or_below(share, STEP, NodeRanks(group_rank=1, nodes=nodes, per_node=1))
    share_requests = proxy.requests - before
    record = restored_in_part(share) or {}
    left_out = {key.rsplit("/", 1)[-1] for key in [*record.get("pieces", {}), *record.get("absent", [])]}
    share_bytes = sum(p.stat().st_size for p in shared.rglob("*") if p.is_file() and p.name not in left_out) + sum(
        length for ranges in record.get("pieces", {}).values() for _, length in ranges) if shared else 0
    return {"nodes": nodes, "published": published, "requests_per_publish": publish_requests,
            "requests_per_publish_per_node": round(publish_requests / nodes, 1),
            "requests_per_restore": restore_requests, "bytes_restored_per_node": restored_bytes,
            "requests_per_restore_share": share_requests, "bytes_restored_per_node_share": share_bytes,
            "metadata_bytes": (folders[0] / ".metadata").stat().st_size,
            "own_share_bytes": shard_bytes, "seconds": round(time.monotonic() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    parser.add_argument("--shard-kb", type=int, default=64)
    parser.add_argument("--label", default="this checkout")
    args = parser.parse_args()
    runs = []
    with MotoServer() as server, FaultProxy(server.port) as proxy, tempfile.TemporaryDirectory(prefix="p11-") as tmp:
        os.environ.update(server.env())
        boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket=BUCKET)
        for nodes in args.nodes:
            runs.append(one_run(proxy, Path(tmp), nodes, args.shard_kb * 1024))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "p11_sharded_requests", "code": args.label, "shard_kb": args.shard_kb,
                      "cpus": os.cpu_count(), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
