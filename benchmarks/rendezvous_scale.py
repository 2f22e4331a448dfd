"""The S3 rendezvous at N = 16 to 128 nodes: how fast a round forms, keep-alives missed, spurious rounds.

Every node is torch's dynamic rendezvous handler as torchrun builds it here (spot_trainer's
`create_s3_handler`, one S3 client each), a thread of one of `--processes` worker processes (4 by default,
N/4 nodes each), so the figures measure the rendezvous, not one interpreter lock playing 128 nodes. S3 is,
with `--s3 moto`, one local moto server behind a proxy (its own process) that adds `--latency-ms` to every
request; with `--s3 small` (the default), tests/support/small_s3.py in its own process, which adds the
latency itself: moto spends about 40 ms of CPU on a listing of 130 keys, so at 64 nodes and more on two
cores a run on it measures moto.

Per N, `--repeat` rounds (min = max = N) are formed, each under a new job: every worker first builds its
handlers and says so, then all call `next_rendezvous()` at one agreed instant, and a round's formation time
is from that instant until its last node's call returned. After the last round, each node does for
`--seconds` what torchrun's agent does while its workers train: asks `num_nodes_waiting()` (a positive answer
restarts the round) about once a second, with a command of the user's own (a peer gone from the round
counts), while torch's keep-alive timer beats.

Time is scaled down 2.5x by default: keep-alive every 2 s instead of torch's 5 s (`--keep-alive`), a node
dead after three silent intervals (6 s instead of 15 s), a heartbeat given one interval, so `--seconds 240`
plays 10 minutes. S3's latency and torch's own fixed 1 s pauses (its state cache, its poll while a round
forms) are not scaled, which makes the run harder than the minutes it stands for. A round that does not
form within `--join-timeout` seconds counts as that long, and the steady phase is skipped.

Reported per N (one JSON line): each round's formation time, p50 and p99 (nearest rank: of 3 rounds, the
middle and the slowest), conditional writes of the shared state per round and how many lost, and from the
steady phase: keep-alives missed (torch's warning that it gave up on one), conditional writes, live nodes
declared dead, and spurious rounds (times a round would restart with every node alive; triggers within one
dead-node timeout of each other are one round).

    python benchmarks/rendezvous_scale.py [--nodes 16 32 64 128] [--latency-ms 80] [--repeat 3] [--seconds 240]

To measure another checkout's code, put a folder holding `spot_trainer` (a link to its `spot_trainer/`) first on
PYTHONPATH: `--label` names it in the output.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import boto3
from torch.distributed.elastic.rendezvous import RendezvousParameters

sys.path.append(str(Path(__file__).resolve().parent.parent))

from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.distributed import handler as handler_module  # noqa: E402
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


def one_run(nodes: int, args: argparse.Namespace, workers: list[subprocess.Popen[str]], job: str,
            steady: float) -> dict[str, Any]:
    """One round of N nodes spread over the workers, started at once after every node's handler exists;
    then, if `steady`, that many seconds of training. The figures of every worker, summed."""
    shares = [range(nodes)[index::len(workers)] for index in range(len(workers))]
    for worker, share in zip(workers, shares, strict=True):
        _say(worker, {"job": job, "nodes": nodes, "ids": list(share)})
    for worker in workers:
        _hear(worker)  # its handlers exist
    start_at = time.time() + 0.5
    for worker in workers:
        _say(worker, {"start_at": start_at, "steady": steady})
    reports = [_hear(worker) for worker in workers]
    joined = [at for report in reports for at in report["joined"]]
    figures: dict[str, Any] = {"formed": all(at is not None for at in joined) and len(joined) == nodes}
    figures["formed_s"] = round(max(at for at in joined if at is not None) if figures["formed"]
                                else args.join_timeout, 2)
    for name in ("state_writes", "conflicts", "heartbeats_missed", "steady_state_writes", "steady_conflicts"):
        figures[name] = sum(report[name] for report in reports)
    if steady and figures["formed"]:
        triggers = sorted(at for report in reports for at in report["triggers"])
        rounds, last = 0, -1e9
        for at in triggers:
            rounds, last = (rounds + 1, at) if at > last + args.keep_alive * MAX_ATTEMPTS else (rounds, last)
        figures["steady_s"] = round(max(report["steady_s"] for report in reports), 1)
        figures["simulated_minutes"] = round(figures["steady_s"] * TORCH_KEEP_ALIVE_SECONDS / args.keep_alive / 60, 1)
        figures["live_nodes_declared_dead"] = len({node for report in reports for node in report["declared_dead"]})
        figures["spurious_rounds"] = rounds
    return figures


def work(args: argparse.Namespace) -> None:
    """A worker process: plays the nodes it is handed, round after round, on orders read from stdin."""
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"  # as launch.py sets it: rank 0 hosts no store here
    tally = Tally()
    logging.getLogger("torch.distributed.elastic.rendezvous.dynamic_rendezvous").addHandler(tally)
    writes = StateWrites()
    for line in sys.stdin:
        order = json.loads(line)
        handlers = {node: create_s3_handler(params(order["nodes"], node, order["job"], args.keep_alive,
                                                   args.join_timeout)) for node in order["ids"]}
        print(json.dumps({"ready": len(handlers)}), flush=True)
        go = json.loads(sys.stdin.readline())
        time.sleep(max(0.0, go["start_at"] - time.time()))
        missed, (state_writes, lost) = tally.missed, writes.read()
        with ThreadPoolExecutor(max_workers=len(handlers)) as pool:
            joined = list(pool.map(_joined, handlers.values(), [go["start_at"]] * len(handlers)))
        report: dict[str, Any] = {"joined": joined, "triggers": [], "declared_dead": [], "steady_s": 0.0}
        formed_writes, formed_lost = writes.read()
        if go["steady"] and all(at is not None for at in joined):
            report.update(train(handlers, go["steady"]))
        now_writes, now_lost = writes.read()
        report.update({"state_writes": formed_writes - state_writes, "conflicts": formed_lost - lost,
                       "steady_state_writes": now_writes - formed_writes, "steady_conflicts": now_lost - formed_lost,
                       "heartbeats_missed": tally.missed - missed})
        for handler in handlers.values():
            handler._stop_heartbeats()
        handler_module._CREATED.clear()  # the handlers torchrun would make once: let this round's go
        del handlers
        gc.collect()  # 128 nodes x 4 rounds of clients otherwise outgrow the machine's memory
        print(json.dumps(report), flush=True)


def train(handlers: dict[int, Any], seconds: float) -> dict[str, Any]:
    """What torchrun's agent does while its workers train: asks `num_nodes_waiting()` about once a second,
    with a command of the user's own (a peer gone from the round counts), while torch's keep-alive beats."""
    os.environ[ROUND_RESUME_ENV] = "1"
    triggers: list[float] = []
    declared_dead: set[int] = set()
    lock = threading.Lock()
    steady_start = time.time()
    stop_at = steady_start + seconds

    def node_trains(node: int) -> None:
        handler = handlers[node]
        while time.time() < stop_at:
            time.sleep(POLL_SECONDS)
            try:
                waiting = handler.num_nodes_waiting()
            except Exception as error:  # noqa: BLE001 - torchrun would end the round: count it as one
                print(f"node {node}: {error}", file=sys.stderr)
                waiting = 1
            state = handler._state_holder.state
            if waiting:
                with lock:
                    triggers.append(time.time() - steady_start)
                    declared_dead.update(_node_id(n.addr) for n in handler.round_members - set(state.participants))
                handler.round_members = frozenset(state.participants)  # as if the round re-formed
            if handler._this_node not in state.participants:
                with lock:
                    declared_dead.add(node)
                return  # its torchrun would rejoin: a new round for every node

    with ThreadPoolExecutor(max_workers=len(handlers)) as pool:
        list(pool.map(node_trains, handlers))
    del os.environ[ROUND_RESUME_ENV]
    return {"triggers": triggers, "declared_dead": sorted(declared_dead), "steady_s": time.time() - steady_start}


def _node_id(addr: str) -> int:
    third, fourth = addr.split(".")[2:]
    return int(third) * 250 + int(fourth) - 1


def _say(worker: subprocess.Popen[str], order: dict[str, Any]) -> None:
    assert worker.stdin is not None
    worker.stdin.write(json.dumps(order) + "\n")
    worker.stdin.flush()


def _hear(worker: subprocess.Popen[str]) -> dict[str, Any]:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    if not line:
        raise RuntimeError(f"a worker process ended (exit {worker.wait(timeout=10)}): see its stderr")
    answer: dict[str, Any] = json.loads(line)
    return answer


def _joined(handler: Any, start_at: float) -> float | None:
    """Seconds from the common start until this node's round formed; None when it never did."""
    try:
        handler.next_rendezvous()
        return time.time() - start_at
    except Exception as error:  # noqa: BLE001 - a round that never forms is the figure
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return None


def serve_small_s3(latency: float) -> None:
    """The small S3's own process (its own interpreter lock, not the nodes'): prints its endpoint, serves
    until stdin closes, then prints its request count."""
    with SmallS3(latency=latency) as s3:
        print(s3.endpoint, flush=True)
        sys.stdin.read()
        print(s3.requests, flush=True)


@contextmanager
def s3_endpoint(args: argparse.Namespace) -> Iterator[tuple[str, Callable[[], int]]]:
    """The stand-in for S3 with the latency added, each in its own process: its endpoint, and a call that
    stops it and answers how many requests it served."""
    with ExitStack() as stack:
        if args.s3 == "small":
            server = stack.enter_context(_child(["--serve-small-s3"], args))
        else:
            moto = stack.enter_context(MotoServer())
            server = stack.enter_context(_child(["--proxy-for", str(moto.port)], args))
        assert server.stdout is not None and server.stdin is not None
        endpoint = server.stdout.readline().strip()
        endpoint = endpoint if endpoint.startswith("http") else f"http://localhost:{endpoint}"

        def stop() -> int:
            assert server.stdout is not None and server.stdin is not None
            server.stdin.close()
            return int(server.stdout.readline() or 0)

        yield endpoint, stop


@contextmanager
def _child(flags: list[str], args: argparse.Namespace) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen([sys.executable, __file__, *flags, "--latency-ms", str(args.latency_ms),
                              "--keep-alive", str(args.keep_alive), "--join-timeout", str(args.join_timeout)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield child
    finally:
        child.kill()
        child.wait(timeout=10)


def measure(args: argparse.Namespace) -> None:
    with s3_endpoint(args) as (endpoint, stop), ExitStack() as stack:
        os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                           "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"})
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        workers = [stack.enter_context(_child(["--worker"], args)) for _ in range(args.processes)]
        for nodes in args.nodes:
            runs = [one_run(nodes, args, workers, f"scale-{nodes}-{repeat}-{int(time.time())}",
                            args.seconds if repeat == args.repeat - 1 else 0.0) for repeat in range(args.repeat)]
            formed = sorted(run["formed_s"] for run in runs)
            summary = {"label": args.label, "s3": args.s3, "latency_ms": args.latency_ms, "nodes": nodes,
                       "processes": len(workers), "rounds_formed": sum(run["formed"] for run in runs),
                       "rounds": len(runs), "formed_s": [run["formed_s"] for run in runs],
                       "formed_p50_s": _percentile(formed, 0.5), "formed_p99_s": _percentile(formed, 0.99),
                       "state_writes_per_round": round(sum(run["state_writes"] for run in runs) / len(runs), 1),
                       "conflicts_per_round": round(sum(run["conflicts"] for run in runs) / len(runs), 1),
                       "heartbeats_missed_forming": sum(run["heartbeats_missed"] for run in runs[:-1])}
            last = runs[-1]
            summary.update({name: last[name] for name in ("steady_s", "simulated_minutes", "heartbeats_missed",
                                                          "steady_state_writes", "steady_conflicts",
                                                          "live_nodes_declared_dead", "spurious_rounds")
                            if name in last})
            print(json.dumps(summary), flush=True)
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.close()
        print(json.dumps({"label": args.label, "s3_requests": stop()}))


def _percentile(ordered: list[float], share: float) -> float:
    """Nearest rank: of 3 rounds, p50 is the middle one and p99 the slowest."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--latency-ms", type=float, default=80)
    parser.add_argument("--seconds", type=float, default=240, help="steady phase after the last round, wall seconds")
    parser.add_argument("--repeat", type=int, default=3, help="rounds formed per N (the steady phase follows the last)")
    parser.add_argument("--processes", type=int, default=4, help="worker processes the nodes are spread over")
    parser.add_argument("--keep-alive", type=int, default=2, help="keep-alive interval (torch's: 5 s)")
    parser.add_argument("--join-timeout", type=int, default=180, help="seconds a round may take to form")
    parser.add_argument("--s3", choices=("small", "moto"), default="small")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--proxy-for", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-small-s3", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_small_s3:
        return serve_small_s3(args.latency_ms / 1000)
    if args.proxy_for:
        return serve_proxy(args.proxy_for, args.latency_ms / 1000)
    if args.worker:
        return work(args)
    return measure(args)


if __name__ == "__main__":
    main()
