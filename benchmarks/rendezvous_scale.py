"""The S3 rendezvous at N = 16 to 128 nodes: conditional-write conflicts, heartbeats missed, spurious rounds.

Every node is torch's dynamic rendezvous handler as torchrun builds it here (spot_trainer's
`create_s3_handler`, one S3 client each), a thread of this one process. S3 is, with `--s3 moto`, one
local moto server behind a proxy (its own process) that adds `--latency-ms` to every request; with
`--s3 small` (the default), tests/support/small_s3.py in its own process, which adds the latency
itself: moto spends about 40 ms of CPU on a listing of 130 keys, so at 64 nodes and more on two cores
a run on it measures moto. The nodes form one round (min = max = N), then each does what torchrun's
agent does while its workers train: asks `num_nodes_waiting()` (a positive answer restarts the round)
about once a second, with a command of the user's own (a peer gone from the round counts), while
torch's keep-alive timer beats.

Time is scaled down 2.5x by default: keep-alive every 2 s instead of torch's 5 s (`--keep-alive`), a node
dead after three silent intervals (6 s instead of 15 s), a heartbeat given one interval, so `--seconds 240`
plays 10 minutes. S3's latency and torch's own fixed 1 s pauses (its state cache, its poll while a round
forms) are not scaled, which makes the run harder than the minutes it stands for; scaled further (1 s),
those pauses alone come near the dead-node timeout. A round that does not form within `--join-timeout`
seconds is reported as such, and its steady phase skipped.

Reported per N: conditional writes of the state and how many lost (conflicts per second of the steady
phase), heartbeats missed (a keep-alive torch gave up on: its warning), live nodes declared dead, and
spurious rounds (times a round would restart with every node alive; triggers within one dead-node
timeout of each other are one round).

    python benchmarks/rendezvous_scale.py [--nodes 16 32 64 128] [--latency-ms 80] [--seconds 240]

To measure another checkout's code, put a folder holding `spot_trainer` (a link to its `trainer/`) first on
PYTHONPATH: `--label` names it in the output.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from torch.distributed.elastic.rendezvous import RendezvousParameters

sys.path.append(str(Path(__file__).resolve().parent.parent))

from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.distributed import s3_objects  # noqa: E402
from spot_trainer.distributed.handler import create_s3_handler  # noqa: E402
from spot_trainer.distributed.rounds import ROUND_RESUME_ENV  # noqa: E402
from tests.support.s3_proxy import FaultProxy  # noqa: E402
from tests.support.small_s3 import SmallS3  # noqa: E402

BUCKET = "rendezvous-scale"
TORCH_KEEP_ALIVE_SECONDS, MAX_ATTEMPTS = 5, 3  # torch's defaults, and the agent's
POLL_SECONDS = 1.0
MISSED = "failed to send a keep-alive heartbeat"


class Tally(logging.Handler):
    """Counts torch's warnings that a keep-alive heartbeat could not be sent."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.missed = 0

    def emit(self, record: logging.LogRecord) -> None:
        if MISSED in record.getMessage():
            self.missed += 1


class StateWrites:
    """Counts conditional writes of the shared state object, and the ones another node won."""

    def __init__(self) -> None:
        self.lock, self.writes, self.lost = threading.Lock(), 0, 0
        original = s3_objects.ConditionalObjects.write

        def counted(objects: Any, name: str, body: bytes, *, expected: str | None) -> str | None:
            written = original(objects, name, body, expected=expected)
            if name == "state":
                with self.lock:
                    self.writes += 1
                    self.lost += written is None
            return written

        s3_objects.ConditionalObjects.write = counted  # type: ignore[method-assign]

    def read(self) -> tuple[int, int]:
        with self.lock:
            return self.writes, self.lost


def serve_proxy(upstream: int, latency: float) -> None:
    """The proxy's own process: prints its port, serves until stdin closes, then prints its request count."""
    with FaultProxy(upstream, latency=latency) as proxy:
        print(proxy.server.server_address[1], flush=True)
        sys.stdin.read()
        print(proxy.requests, flush=True)


def params(nodes: int, node: int, job: str, keep_alive: int, join_timeout: int) -> RendezvousParameters:
    return RendezvousParameters(
        backend="s3", endpoint=f"{BUCKET}/{job}", run_id=job, min_nodes=nodes, max_nodes=nodes,
        local_addr=f"10.0.{node // 250}.{node % 250 + 1}", last_call_timeout=1, join_timeout=join_timeout,
        heartbeat_timeout=keep_alive, keep_alive_interval=keep_alive, keep_alive_max_attempt=MAX_ATTEMPTS)


def one_run(nodes: int, args: argparse.Namespace, writes: StateWrites, tally: Tally) -> dict[str, Any]:
    job = f"scale-{nodes}-{int(time.time())}"
    handlers = [create_s3_handler(params(nodes, node, job, args.keep_alive, args.join_timeout))
                for node in range(nodes)]
    scale, seconds = TORCH_KEEP_ALIVE_SECONDS / args.keep_alive, args.seconds
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=nodes) as pool:
        joined = list(pool.map(lambda handler: _joined(handler), handlers))
    formed = time.monotonic() - started
    if not all(joined):
        for handler in handlers:
            handler._stop_heartbeats()
        writes_now, lost_now = writes.read()
        return {"nodes": nodes, "formed": False, "formed_s": round(formed, 1), "state_writes": writes_now,
                "conflicts": lost_now, "heartbeats_missed": tally.missed}
    os.environ[ROUND_RESUME_ENV] = "1"
    writes_before, lost_before = writes.read()
    missed_before = tally.missed
    triggers: list[float] = []
    declared_dead: set[int] = set()
    lock = threading.Lock()
    steady_start = time.monotonic()
    stop_at = steady_start + seconds

    def train(node: int) -> None:
        handler = handlers[node]
        while time.monotonic() < stop_at:
            time.sleep(POLL_SECONDS)
            try:
                waiting = handler.num_nodes_waiting()
            except Exception as error:  # noqa: BLE001 - torchrun would end the round: count it as one
                print(f"node {node}: {error}", file=sys.stderr)
                waiting = 1
            state = handler._state_holder.state
            if waiting:
                with lock:
                    triggers.append(time.monotonic() - steady_start)
                    declared_dead.update(int(n.addr.split(".")[2]) * 250 + int(n.addr.split(".")[3]) - 1
                                         for n in handler.round_members - set(state.participants))
                handler.round_members = frozenset(state.participants)  # as if the round re-formed
            if handler._this_node not in state.participants:
                with lock:
                    declared_dead.add(node)
                return  # its torchrun would rejoin: a new round for every node

    with ThreadPoolExecutor(max_workers=nodes) as pool:
        list(pool.map(train, range(nodes)))
    steady = time.monotonic() - steady_start
    del os.environ[ROUND_RESUME_ENV]
    state_writes, lost = writes.read()
    state_writes, lost = state_writes - writes_before, lost - lost_before
    for handler in handlers:
        handler._stop_heartbeats()
    rounds, last = 0, -1e9
    for at in sorted(triggers):
        rounds, last = (rounds + 1, at) if at > last + args.keep_alive * MAX_ATTEMPTS else (rounds, last)
    return {"nodes": nodes, "formed": True, "formed_s": round(formed, 1), "steady_s": round(steady, 1),
            "simulated_minutes": round(steady * scale / 60, 1), "state_writes": state_writes, "conflicts": lost,
            "conflicts_per_s": round(lost / steady, 2), "heartbeats_missed": tally.missed - missed_before,
            "live_nodes_declared_dead": len(declared_dead), "spurious_rounds": rounds}


def _joined(handler: Any) -> bool:
    try:
        handler.next_rendezvous()
        return True
    except Exception as error:  # noqa: BLE001 - a round that never forms is the figure
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return False


def serve_small_s3(latency: float) -> None:
    """The small S3's own process (its own interpreter lock, not the nodes'): prints its endpoint, serves
    until stdin closes, then prints its request count."""
    with SmallS3(latency=latency) as s3:
        print(s3.endpoint, flush=True)
        sys.stdin.read()
        print(s3.requests, flush=True)


def on_small_s3(args: argparse.Namespace, writes: StateWrites, tally: Tally) -> None:
    server = subprocess.Popen([sys.executable, __file__, "--serve-small-s3", "--latency-ms", str(args.latency_ms)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdin is not None
        endpoint = server.stdout.readline().strip()
        os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                           "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"})
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        for nodes in args.nodes:
            figures = one_run(nodes, args, writes, tally)
            print(json.dumps({"label": args.label, "s3": "small", "latency_ms": args.latency_ms, **figures}),
                  flush=True)
        server.stdin.close()
        print(json.dumps({"label": args.label, "s3_requests": int(server.stdout.readline() or 0)}))
    finally:
        server.kill()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--latency-ms", type=float, default=80)
    parser.add_argument("--seconds", type=float, default=240, help="steady phase, wall seconds")
    parser.add_argument("--keep-alive", type=int, default=2, help="keep-alive interval (torch's: 5 s)")
    parser.add_argument("--join-timeout", type=int, default=180, help="seconds a round may take to form")
    parser.add_argument("--s3", choices=("small", "moto"), default="small")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--proxy-for", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-small-s3", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_small_s3:
        return serve_small_s3(args.latency_ms / 1000)
    if args.proxy_for:
        return serve_proxy(args.proxy_for, args.latency_ms / 1000)
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"  # as launch.py sets it: rank 0 hosts no store here
    tally = Tally()
    logging.getLogger("torch.distributed.elastic.rendezvous.dynamic_rendezvous").addHandler(tally)
    writes = StateWrites()
    if args.s3 == "small":
        return on_small_s3(args, writes, tally)
    with MotoServer() as moto:
        os.environ.update({**moto.env(), "AWS_EC2_METADATA_DISABLED": "true"})
        boto3.client("s3", endpoint_url=moto.endpoint).create_bucket(Bucket=BUCKET)
        proxy = subprocess.Popen([sys.executable, __file__, "--proxy-for", str(moto.port),
                                  "--latency-ms", str(args.latency_ms)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert proxy.stdout is not None and proxy.stdin is not None
            os.environ["AWS_ENDPOINT_URL"] = f"http://localhost:{proxy.stdout.readline().strip()}"
            for nodes in args.nodes:
                figures = one_run(nodes, args, writes, tally)
                print(json.dumps({"label": args.label, "latency_ms": args.latency_ms, **figures}), flush=True)
            proxy.stdin.close()
            print(json.dumps({"label": args.label, "s3_requests": int(proxy.stdout.readline() or 0)}))
        finally:
            proxy.kill()
            proxy.wait(timeout=10)


if __name__ == "__main__":
    main()
