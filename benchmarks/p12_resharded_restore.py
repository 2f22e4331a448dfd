"""P12: bytes and S3 requests per node restoring a sharded step at another world size (W → W′), before and after.

One DCP save of a Llama-shaped model (parameters and AdamW's two moments, fp32, and each parameter's 0-d step;
FSDP2's dim-0 split over W ranks, each chunk a torch.save archive as DCP's writer stores it:
tests/support/dcp_metadata.py) is written as W nodes' parts, one rank each, and published through the agent's
own code (StepParts) to a local moto server.
Then nodes of the W′-rank world restore it as a round does (`restore_at_or_below` for its ranks): before, as
this runtime did until now, all of the step (shards.node_share at another world size); after, what the node's
ranks read (resharded.node_reads). Bytes and requests are counted at a proxy in front of moto (GET bodies).
Beside them: what torch's own load planner has the node's rank read (`plan_bytes`: whole stored chunks, as
DCP's file reader reads them) and its rows' part of the state (`state / W′`); after, a chunk the rank uses only
in part is fetched without the rows it does not use.

    python benchmarks/p12_resharded_restore.py [--worlds 4:3 8:6 64:48] [--dim 512] [--layers 2]

With --plan-only nothing is written or sent: the share each node would fetch is computed from the `.metadata`
alone, for models too large to write here (`--layers 32 --dim 4096 --vocab 32000 --per-node 8`: Llama-2 7B's
shapes on nodes of 8 GPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3

sys.path.append(str(Path(__file__).resolve().parent.parent))

from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.storage.saves import resharded, shards  # noqa: E402
from spot_trainer.storage.saves.shards import NodeRanks  # noqa: E402
from spot_trainer.storage.steps.remote import RemoteStore  # noqa: E402
from spot_trainer.storage.steps.step_parts import StepParts  # noqa: E402
from tests.support.dcp_metadata import fsdp_items, fsdp_metadata, llama_shapes, plan_reads  # noqa: E402
from tests.support.s3_proxy import FaultProxy  # noqa: E402

BUCKET = "p12-resharded"
STEP = 100


def write_save(root: Path, items: dict[str, tuple[int, ...]], world: int) -> tuple[bytes, dict[str, int], list[Path]]:
    """The save written as DCP writes it (each chunk a torch.save archive), each rank's file in its node's folder,
    `.metadata` in node 0's."""
    whole = root / "whole"
    whole.mkdir(parents=True)
    body, sizes = fsdp_metadata(items, world, folder=whole)
    folders = []
    for rank in range(world):
        folder = root / f"node{rank}" / f"step-{STEP}"
        folder.mkdir(parents=True)
        (whole / f"__{rank}_0.distcp").rename(folder / f"__{rank}_0.distcp")
        folders.append(folder)
    (folders[0] / shards.METADATA).write_bytes(body)
    return body, sizes, folders


def restore(proxy: FaultProxy, store: RemoteStore, into: Path, ranks: NodeRanks) -> tuple[int, int, float]:
    """(bytes, requests, seconds) of one node's restore, counted at the proxy."""
    requests, served, started = proxy.requests, proxy.bytes_served, time.monotonic()
    assert store.restore_at_or_below(into, STEP, ranks) is not None and store.restored_step == STEP
    return proxy.bytes_served - served, proxy.requests - requests, time.monotonic() - started


def one_world(proxy: FaultProxy, root: Path, saved: int, world: int, items: dict[str, tuple[int, ...]],
              sample: int) -> dict[str, Any]:
    job = f"p12-{saved}-{world}"
    body, sizes, folders = write_save(root / job, items, saved)
    stores = [RemoteStore(boto3.client("s3", endpoint_url=proxy.endpoint), BUCKET, job, instance=f"i-{rank}")
              for rank in range(saved)]
    for rank, folder in enumerate(folders):
        StepParts(stores[rank]).upload(folder, STEP)
    for rank in range(saved):
        StepParts(stores[rank]).publish_if_whole(STEP)
    assert stores[0].latest_step() == STEP, "the save was not published"
    nodes = sorted({round(i * (world - 1) / max(sample - 1, 1)) for i in range(sample)})
    before, after = [], []
    real = resharded.node_reads
    for node in nodes:
        ranks = NodeRanks(group_rank=node, nodes=world, per_node=1)
        resharded.node_reads = shards.node_share  # type: ignore[assignment]  # the runtime until now
        try:
            before.append(restore(proxy, stores[0], root / job / f"before{node}", ranks))
        finally:
            resharded.node_reads = real  # type: ignore[assignment]
        after.append(restore(proxy, stores[0], root / job / f"after{node}", ranks))
    plan = [sum(length for ranges in plan_reads(body, range(node, node + 1), world).values() for _, length in ranges)
            for node in nodes]
    state = sum(sizes.values())
    return {
        "saved_world": saved, "world": world, "nodes_measured": nodes, "state_bytes": state,
        "metadata_bytes": len(body), "chunks": sum(1 for _ in items) * saved,
        "bytes_per_node_before": round(statistics.mean(b for b, _, _ in before)),
        "bytes_per_node_after": round(statistics.mean(b for b, _, _ in after)),
        "bytes_per_node_after_max": max(b for b, _, _ in after), "bytes_after_by_node": [b for b, _, _ in after],
        "requests_per_node_before": round(statistics.mean(r for _, r, _ in before), 1),
        "requests_per_node_after": round(statistics.mean(r for _, r, _ in after), 1),
        "seconds_per_node_before": round(statistics.mean(s for _, _, s in before), 2),
        "seconds_per_node_after": round(statistics.mean(s for _, _, s in after), 2),
        "plan_bytes_per_node": round(statistics.mean(plan)),
        "after_over_plan_and_metadata": round(max(b / (p + len(body)) for (b, _, _), p in zip(after, plan,
                                                                                            strict=True)), 3),
        "after_over_rows_share_and_metadata": round(max(b for b, _, _ in after) / (state / world + len(body)), 3),
    }


def planned(saved: int, world: int, per_node: int, items: dict[str, tuple[int, ...]], sample: int) -> dict[str, Any]:
    """What nodes of W′ ranks (`per_node` each) would fetch, from `.metadata` alone (nothing written or sent):
    bytes, ranged GETs (one a piece; files fetched whole as one), and the seconds the share takes to compute."""
    body, sizes = fsdp_metadata(items, saved)
    nodes = world // per_node
    measured = sorted({round(i * (nodes - 1) / max(sample - 1, 1)) for i in range(sample)})
    fetched, requests, seconds = [], [], []
    for node in measured:
        started = time.monotonic()
        share = resharded.node_reads(body, set(sizes), NodeRanks(group_rank=node, nodes=nodes, per_node=per_node))
        seconds.append(time.monotonic() - started)
        fetched.append(sum(length for ranges in share.pieces.values() for _, length in ranges)
                       + sum(sizes[name] for name in share.whole) + len(body))
        requests.append(sum(len(ranges) for ranges in share.pieces.values()) + len(share.whole) + 1)
    state = sum(sizes.values())
    return {"saved_world": saved, "world": world, "per_node": per_node, "nodes_measured": measured,
            "state_bytes": state, "metadata_bytes": len(body), "bytes_per_node_before": state + len(body),
            "bytes_per_node_after": round(statistics.mean(fetched)), "bytes_per_node_after_max": max(fetched),
            "ranged_gets_per_node_after": round(statistics.mean(requests), 1),
            "after_over_rows_share_and_metadata": round(max(fetched) / (state * per_node / world + len(body)), 3),
            "seconds_to_compute_share": round(max(seconds), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", nargs="+", default=["4:3", "8:6", "64:48"], help="W:W′ pairs")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--sample", type=int, default=3, help="nodes of the W′ world measured (first to last)")
    parser.add_argument("--vocab", type=int, default=0, help="default: 16 × dim")
    parser.add_argument("--plan-only", action="store_true",
                        help="no S3: what each node would fetch, from .metadata alone (for models too big to write)")
    parser.add_argument("--per-node", type=int, default=1, help="ranks a node, with --plan-only")
    args = parser.parse_args()
    items = fsdp_items(llama_shapes(args.layers, args.dim, hidden=int(args.dim * 2.6875),
                                    vocab=args.vocab or args.dim * 16))
    runs = []
    if args.plan_only:
        for pair in args.worlds:
            saved, world = (int(part) for part in pair.split(":"))
            runs.append(planned(saved, world, args.per_node, items, args.sample))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
        print(json.dumps({"benchmark": "p12_resharded_restore", "plan_only": True, "layers": args.layers,
                          "dim": args.dim, "items": len(items), "cpus": os.cpu_count(), "runs": runs}, indent=1))
        return
    with MotoServer() as server, FaultProxy(server.port) as proxy, tempfile.TemporaryDirectory(prefix="p12-") as tmp:
        os.environ.update(server.env())
        boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket=BUCKET)
        for pair in args.worlds:
            saved, world = (int(part) for part in pair.split(":"))
            runs.append(one_world(proxy, Path(tmp), saved, world, items, args.sample))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"benchmark": "p12_resharded_restore", "layers": args.layers, "dim": args.dim,
                      "items": len(items), "cpus": os.cpu_count(), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
