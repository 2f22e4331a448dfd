"""P7: what losing one node of three costs, this design against a whole-group restart.

Three agents train as one torchrun world (gloo, real processes, each node its own 127.0.0.x and
disk, the rendezvous in moto's S3), once with the built-in LM and once with a plain DDP script of the
user's own (tests/fixtures/plain_scripts/ddp_silent.py, which knows nothing of Spot Trainer; its
--progress lines are the clock). At the same step the node publishing checkpoints (rank 0) is
SIGKILLed; a replacement "boots" for --boot-seconds and then starts. Side by side, for each command:

- this design: the two survivors keep their agents, fetch the newest checkpoint and train on as a
  world of two; the replacement joins the next round.
- whole-group restart (what SkyPilot, dstack, SageMaker or a Slurm requeue do): every node is
  stopped, three fresh ones boot for the same --boot-seconds, restore from S3 and rendezvous.

For each: seconds from the loss to training again at full size (the replacement's first step in a
world of three), and the useful steps trained during that outage (global steps beyond the
checkpoint both resume from). Prints one JSON object.

    .venv/bin/python benchmarks/p7_multinode.py [--commands builtin own]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from stacks.help_text import first_paragraph

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import boto3  # noqa: E402

from localcloud.fake_imds import FakeImds  # noqa: E402
from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.storage.steps.remote import RemoteStore  # noqa: E402
from tests.integration.agent_runner import AgentProcess, agent_env  # noqa: E402

TRAIN_ARGS = ("--model lm --synthetic --steps 100000 --width 16 --context 16 --batch-size 12 "
              "--checkpoint-every-steps 10 --log-every 1 --min-step-seconds {pace}")
OWN_DDP = REPO_ROOT / "tests/fixtures/plain_scripts/ddp_silent.py"


def command_settings(kind: str, pace: float) -> dict[str, str]:
    if kind == "builtin":
        return {"command": "builtin", "train_args": TRAIN_ARGS.format(pace=pace)}
    return {"command": f"{sys.executable} {OWN_DDP} --steps 100000 --save-every 10 --step-seconds {pace} --progress"}


class Nodes:
    """Agents of one job; each `start` is a new instance with its own address, IMDS and disk."""

    def __init__(self, env: dict[str, str], bucket: str, job: str, root: Path, command: dict[str, str]) -> None:
        self.env, self.bucket, self.job, self.root, self.command = env, bucket, job, root, command
        self.stack = contextlib.ExitStack()
        self.agents: list[AgentProcess] = []

    def start(self) -> AgentProcess:
        node = len(self.agents) + 1
        imds = self.stack.enter_context(FakeImds(instance_id=f"i-{node}", local_ipv4=f"127.0.0.{node + 1}"))
        env = agent_env(self.env, bucket=self.bucket, job=self.job, checkpoint_dir=self.root / f"node{node}",
                        imds_url=imds.url, instance_id=f"i-{node}", **self.command, distributed="true", min_nodes="2",
                        max_nodes="3", rdzv_last_call_seconds="2", rdzv_keep_alive_seconds="2", grace_seconds="30")
        env["OMP_NUM_THREADS"] = "1"
        agent = AgentProcess(env).start()
        self.agents.append(agent)
        return agent

    def writer(self) -> AgentProcess:
        """The node whose agent last said it publishes (it holds rank 0 in the round)."""
        return next(agent for agent in self.agents if agent.publishes())

    def close(self) -> None:
        for agent in self.agents:
            agent.stop()
        self.stack.close()


def wait(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"p7: timed out waiting for {what}")
        time.sleep(0.05)


def first_step_after(agent: AgentProcess, timeout: float) -> tuple[float, int, int]:
    """(when, step, resumed-from step) of the agent's first training step."""
    wait(lambda: bool(agent.events("step")), timeout, "the first step at full size")
    when = agent.first_time(lambda line: line.startswith('{"event": "step"'))
    resumed = agent.events("resumed")
    if when is None or not resumed:
        raise SystemExit("p7: the first step came with no resume:\n" + agent.text())
    return when, agent.events("step")[0]["step"], resumed[0]["step"]


def lose_a_node(nodes: Nodes, warmup_step: int) -> tuple[float, AgentProcess]:
    for _ in range(3):
        nodes.start()
    wait(lambda: any(e["step"] >= warmup_step for e in nodes.agents[0].events("step")), 180, "warm-up")
    # Both designs resume from the same checkpoint in S3 (a command of the user's own publishes a
    # step once the next one is saved, or the file has been still for a while).
    store = RemoteStore(boto3.client("s3"), nodes.bucket, nodes.job)
    wait(lambda: store.latest_step() is not None, 180, "a checkpoint in S3")
    doomed = nodes.writer()
    doomed.kill_tree()
    return time.monotonic(), doomed


def this_design(nodes: Nodes, boot_seconds: float, warmup_step: int) -> dict[str, float]:
    lost_at, doomed = lose_a_node(nodes, warmup_step)
    time.sleep(boot_seconds)
    replacement = nodes.start()
    full_at, step, resumed = first_step_after(replacement, 240)
    survivor = next(agent for agent in nodes.agents[:3] if agent is not doomed)
    resumed_after_loss = [e["step"] for e in survivor.events("resumed")][0]
    return {"seconds_to_full_size": round(full_at - lost_at, 2),
            "useful_steps_during_outage": step - 1 - resumed_after_loss, "resumed_from": resumed_after_loss,
            "replacement_resumed_at": resumed}


def whole_group_restart(nodes: Nodes, boot_seconds: float, warmup_step: int) -> dict[str, float]:
    lost_at, _ = lose_a_node(nodes, warmup_step)
    for agent in nodes.agents:  # stop all: the survivors' work in flight is thrown away with them
        agent.stop()
    time.sleep(boot_seconds)
    fresh = [nodes.start() for _ in range(3)]
    full_at, step, resumed = first_step_after(fresh[0], 240)
    return {"seconds_to_full_size": round(full_at - lost_at, 2), "useful_steps_during_outage": step - 1 - resumed,
            "resumed_from": resumed}


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--boot-seconds", type=float, default=10.0, help="how long a new instance takes to boot")
    parser.add_argument("--pace", type=float, default=0.2, help="seconds per training step")
    parser.add_argument("--warmup-step", type=int, default=15)
    parser.add_argument("--commands", nargs="+", choices=("builtin", "own"), default=["builtin", "own"])
    args = parser.parse_args()
    results: dict[str, object] = {"benchmark": "p7_multinode", "nodes": 3, "min_nodes": 2,
                                  "boot_seconds": args.boot_seconds, "seconds_per_step": args.pace}
    with TemporaryDirectory() as scratch, MotoServer(log_path=Path(scratch) / "moto.log") as server:
        env = server.env()
        os.environ.update(env)  # boto3 here and in every agent: moto, with its test credentials
        s3 = boto3.client("s3")
        for kind in args.commands:
            by_design: dict[str, object] = {}
            results[kind] = by_design
            for name, scenario in (("this_design", this_design), ("whole_group_restart", whole_group_restart)):
                bucket = f"p7-{kind}-{name.replace('_', '-')}"
                s3.create_bucket(Bucket=bucket)
                nodes = Nodes(env, bucket, "p7", Path(scratch) / kind / name, command_settings(kind, args.pace))
                try:
                    by_design[name] = scenario(nodes, args.boot_seconds, args.warmup_step)
                finally:
                    nodes.close()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
