"""P10: a sharded checkpoint of a fixed total size, saved on 1 to 4 local nodes, from the save's end to
published in S3 (one local moto server).

Each node is a process of its own with its own disk folder holding its rank's shard of one DCP save
(`__<rank>_0.distcp`, the total split evenly; node 0 also holds `.metadata`, which lists every shard)
and runs what its agent runs (spot_trainer.agent.several_nodes.sharded_saves): it polls for its part being ready at
the agent's cadence, uploads it and publishes the step when its part is the last. Two clocks:

  save_to_published    training goes on: every node's agent notices the save at its next poll
  notice_to_published  the command has stopped after a notice's save: node 0 sends at once, the others
                       as soon as node 0's record shows in S3 (the agent's settle after a stop)

Per node, the bytes it sent and its upload seconds. Prints JSON.

    python benchmarks/p10_sharded_publish.py [--mb 1024] [--nodes 1 2 3 4] [--poll 5] [--node-mbps 25]

On one machine every node shares one local server, whose throughput then bounds them all together;
`--node-mbps` caps each node's own uploads as an instance's network does, where N nodes each sending
1/N of the state finish about N times sooner.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import boto3
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.storage.s3.s3client import MB  # noqa: E402
from spot_trainer.storage.steps.remote import RemoteStore  # noqa: E402

BUCKET = "p10-sharded"
STEP = 100

NODE = textwrap.dedent("""
    import json, sys, threading, time
    from pathlib import Path
    import boto3
    from spot_trainer.agent.several_nodes.sharded_saves import ShardedSaves, wait_for_part
    from spot_trainer.storage.steps.remote import RemoteStore
    from spot_trainer.storage.steps.step_parts import StepParts
    from spot_trainer.storage.s3.s3client import MB, upload_config_for
    endpoint, bucket, job, folder, name, mode, poll, start, node_mbps = sys.argv[1:]
    config = None
    if float(node_mbps) > 0:  # this node's own link, as an instance's network limits it
        config = upload_config_for(sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()))
        config.max_bandwidth = int(float(node_mbps) * MB)
    store = RemoteStore(boto3.client("s3", endpoint_url=endpoint), bucket, job, instance=name, transfer_config=config)
    saves = ShardedSaves(StepParts(store), Path(folder), lambda line: None, lambda kind, **fields: None)
    while time.time() < float(start):
        time.sleep(0.001)
    if mode == "settle":
        part = wait_for_part(saves, None, 600.0, threading.Event(), float(poll))
    else:
        part = None
        while part is None:
            part = saves.ready(writer_done=False, above=None)
            if part is None:
                time.sleep(float(poll))
    began = time.time()
    outcome = saves.parts.upload(part.path, part.step)
    print(json.dumps({"node": name, "upload_seconds": time.time() - began, "outcome": str(outcome),
                      "bytes": sum(p.stat().st_size for p in part.path.iterdir())}))
""")


def write_save(root: Path, nodes: int, total_mb: int) -> list[Path]:
    """One DCP-shaped save of `nodes` ranks, one per node, `total_mb` in all."""
    each = total_mb // nodes
    block = os.urandom(MB)
    folders = []
    for rank in range(nodes):
        folder = root / f"node{rank}" / f"step-{STEP}"
        folder.mkdir(parents=True)
        with open(folder / f"__{rank}_0.distcp", "wb") as handle:
            for index in range(each):
                handle.write(block[index % 97:] + block[:index % 97])  # no two MB alike
        folders.append(folder)
    storage = {MetadataIndex(f"rank{r}"): _StorageInfo(f"__{r}_0.distcp", 0, each * MB) for r in range(nodes)}
    (folders[0] / ".metadata").write_bytes(pickle.dumps(Metadata(state_dict_metadata={}, storage_data=storage)))
    return folders


def one_run(server: MotoServer, root: Path, nodes: int, total_mb: int, mode: str, poll: float,
            node_mbps: float) -> dict[str, Any]:
    job = f"p10-{mode}-{nodes}"
    folders = write_save(root / job, nodes, total_mb)
    store = RemoteStore(boto3.client("s3", endpoint_url=server.endpoint), BUCKET, job)
    start = time.time() + 2.0  # every node process imported and waiting: the save's end
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    processes = [subprocess.Popen([sys.executable, "-c", NODE, server.endpoint, BUCKET, job, str(folder.parent),
                                   f"i-{rank}", mode, str(poll), str(start), str(node_mbps)],
                                  env=env, stdout=subprocess.PIPE, text=True) for rank, folder in enumerate(folders)]
    published_at = None
    while published_at is None:
        if store.latest_step() == STEP:
            published_at = time.time()
        elif all(process.poll() is not None for process in processes):
            raise RuntimeError(f"{nodes} node(s), {mode}: every node ended and step {STEP} is not published")
        time.sleep(0.02)
    reports = [json.loads(process.communicate(timeout=600)[0].strip().splitlines()[-1]) for process in processes]
    return {"nodes": nodes, "mode": mode, "seconds_to_published": round(published_at - start, 2),
            "per_node": [{"bytes": r["bytes"], "upload_seconds": round(r["upload_seconds"], 2)} for r in reports],
            "largest_node_mb": round(max(r["bytes"] for r in reports) / MB, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1024, help="the whole sharded state, in MiB (default 1024)")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3, 4], help="node counts (default 1 2 3 4)")
    parser.add_argument("--poll", type=float, default=5.0, help="the agent's poll, in seconds (default 5)")
    parser.add_argument("--node-mbps", type=float, default=0.0,
                        help="each node's upload capped at this many MiB/s, as its network would (default: none, "
                             "so the one local server's throughput bounds all nodes together)")
    args = parser.parse_args()
    runs = []
    with MotoServer() as server, tempfile.TemporaryDirectory(prefix="p10-") as scratch:
        os.environ.update(server.env())
        boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket=BUCKET)
        for nodes in args.nodes:
            for mode in ("training", "settle"):
                runs.append(one_run(server, Path(scratch), nodes, args.mb, mode, args.poll, args.node_mbps))
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "p10_sharded_publish", "total_mb": args.mb, "poll_seconds": args.poll,
                      "node_mbps": args.node_mbps or None,
                      "cpus": os.cpu_count(), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
