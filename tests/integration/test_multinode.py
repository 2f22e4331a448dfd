"""Three nodes train as one under torchrun elastic, with the rendezvous in S3 (moto) and gloo between
real processes on their own loopback addresses. Losing any node, the one holding rank 0 included,
costs only that node: the survivors' agents keep running, fetch the newest checkpoint and re-form.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.costs.budget import job_spend
from spot_trainer.costs.instance_records import read_records
from spot_trainer.costs.spot_prices import TracePrices
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import STEPPER, AgentProcess, agent_env

STEPS = 60
TRAIN_ARGS = (f"--model lm --synthetic --steps {STEPS} --width 16 --context 16 --batch-size 12 "
              "--checkpoint-every-steps 5 --log-every 1 --min-step-seconds 0.15")
NODES = 3
HOLD_AT = 12  # training waits there until the test has injected its fault (the built-in --hold-at-step)


@dataclass
class Cluster:
    """Agents of one job, each with its own IMDS (its own 127.0.0.x address) and checkpoint disk."""

    aws_env: dict[str, str]
    bucket: str
    job: str
    root: Path
    stack: contextlib.ExitStack
    settings: dict[str, str]
    agents: list[AgentProcess] = field(default_factory=list)
    folder: str = ""  # the checkpoint folder inside each node's own directory (its working directory)
    started_at: float = field(default_factory=time.monotonic)

    @property
    def gate(self) -> Path:
        """While this file exists, the built-in trainer of a held cluster waits at step HOLD_AT."""
        return self.root / "hold"

    def release(self) -> None:
        """The fault is in: training goes on past HOLD_AT."""
        self.gate.unlink(missing_ok=True)

    def add(self) -> AgentProcess:
        node = len(self.agents) + 1
        imds = self.stack.enter_context(FakeImds(instance_id=f"i-node{node}", local_ipv4=f"127.0.0.{node}"))
        settings = {"command": "builtin", "train_args": TRAIN_ARGS, "distributed": "true", "min_nodes": "2",
                    "max_nodes": str(NODES), "rdzv_last_call_seconds": "2", "rdzv_keep_alive_seconds": "2",
                    "grace_seconds": "30", **self.settings}
        home = self.root / f"node{node}"
        (home / self.folder).mkdir(parents=True, exist_ok=True)
        env = agent_env(self.aws_env, bucket=self.bucket, job=self.job, checkpoint_dir=home / self.folder,
                        imds_url=imds.url, instance_id=f"i-node{node}", workdir=str(home), **settings)
        env["OMP_NUM_THREADS"] = "1"
        agent = AgentProcess(env).start()
        agent.imds = imds  # type: ignore[attr-defined]
        self.agents.append(agent)
        return agent


@contextlib.contextmanager
def cluster(aws_env: dict[str, str], bucket: str, job: str, root: Path, *, nodes: int = NODES, folder: str = "",
            held: bool = False, **settings: str) -> Iterator[Cluster]:
    """`nodes` agents started at once; a test may add more. `held`: the built-in trainer waits at step
    HOLD_AT until the test calls `release()`, so a fault meets a job that is still training on any machine."""
    with contextlib.ExitStack() as stack:
        group = Cluster(aws_env, bucket, job, root, stack, settings, folder=folder)
        if held:
            group.gate.touch()
            settings["train_args"] = f"{settings.get('train_args', TRAIN_ARGS)} --hold-at-step {HOLD_AT} " \
                                     f"--hold-while {group.gate}"
        for _ in range(nodes):
            group.add()
        try:
            yield group
        finally:
            for agent in group.agents:
                agent.stop()


def job_store(aws_env: dict[str, str], bucket: str, job: str) -> RemoteStore:
    return RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)


def train_a_while(agents: list[AgentProcess], step: int = HOLD_AT) -> None:
    agents[0].wait_for(lambda: any(e["step"] >= step for e in agents[0].events("step")), timeout=120,
                       what=f"step {step}")


def writer(agents: list[AgentProcess]) -> AgentProcess:
    """The node whose rank 0 writes checkpoints (it prints the built-in trainer's checkpoint events)."""
    found = [agent for agent in agents if agent.events("checkpoint")]
    assert len(found) == 1, [len(a.events("checkpoint")) for a in agents]
    return found[0]


def test_hard_kill_of_the_rank_zero_node_costs_only_that_node(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"multi-{bucket[-8:]}"
    with cluster(aws_env, bucket, job, tmp_path, held=True) as group:
        agents = group.agents
        train_a_while(agents)
        doomed = writer(agents)
        survivors = [agent for agent in agents if agent is not doomed]
        doomed.kill_tree()  # a power-off of the node that held rank 0 and the round's TCP store
        group.release()
        for agent in survivors:
            assert agent.wait(timeout=240) == 0, agent.text()
    store = job_store(aws_env, bucket, job)
    assert store.latest_step() == STEPS
    assert store.get_json("status.json")["state"] == "DONE"
    for agent in survivors:
        steps = [e["step"] for e in agent.events("step")]
        assert steps[-1] == STEPS
        resumed = [e["step"] for e in agent.events("resumed")]
        assert resumed and resumed[-1] > 0, "the survivors resumed from a checkpoint, not from scratch"
        assert any("joining the next round" in line for line in agent.lines), agent.text()


def test_a_notice_on_a_non_writer_node_loses_no_completed_step(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"multi-notice-{bucket[-8:]}"
    with cluster(aws_env, bucket, job, tmp_path, held=True) as group:
        agents = group.agents
        train_a_while(agents)
        notified = next(agent for agent in agents if agent is not writer(agents))
        notified.imds.announce_interruption(in_seconds=120)  # type: ignore[attr-defined]
        notified.wait_for(lambda: any("stopping the command" in line for line in notified.lines), timeout=120,
                          what="the notice taken")
        group.release()
        assert notified.wait(timeout=120) == 0, notified.text()
        survivors = [agent for agent in agents if agent is not notified]
        for agent in survivors:
            assert agent.wait(timeout=240) == 0, agent.text()
    (stopped_at,) = {e["step"] for e in notified.events("group_stop")}
    for agent in survivors:
        # Every rank stopped at the same step, rank 0 saved it, and the next round began right there.
        assert [e["step"] for e in agent.events("group_stop")] == [stopped_at]
        assert [e["step"] for e in agent.events("resumed")] == [stopped_at], agent.text()
    store = job_store(aws_env, bucket, job)
    assert store.latest_step() == STEPS
    interruptions = [e for e in store.events() if e["kind"] == "interruption"]
    assert [e["reason"] for e in interruptions] == ["spot interruption notice"]


def test_a_node_that_goes_silent_is_given_up_within_the_collective_timeout(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """A power-off closes no socket: the survivors notice only because the collective times out."""
    job = f"multi-silent-{bucket[-8:]}"
    timeout = 8.0
    with cluster(aws_env, bucket, job, tmp_path, held=True, collective_timeout=str(int(timeout))) as group:
        agents = group.agents
        train_a_while(agents)
        frozen = next(agent for agent in agents if agent is not writer(agents))
        frozen.freeze()
        frozen_at = time.monotonic()
        group.release()
        survivors = [agent for agent in agents if agent is not frozen]
        for agent in survivors:
            agent.wait_for(lambda agent=agent: bool(agent.events("peer_lost")), timeout=60, what="peer lost")
            noticed = agent.first_time(lambda line: '"peer_lost"' in line)
            assert noticed is not None and noticed - frozen_at < timeout + 5
        for agent in survivors:
            assert agent.wait(timeout=240) == 0, agent.text()


def test_a_replacement_joins_the_next_round_and_no_step_is_lost(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"multi-join-{bucket[-8:]}"
    with cluster(aws_env, bucket, job, tmp_path, nodes=2, held=True) as group:
        agents = group.agents
        train_a_while(agents)
        joined = group.add()
        agents[0].wait_for(lambda: bool(agents[0].events("group_stop")), timeout=120, what="the stop to let it in")
        group.release()
        for agent in agents:
            assert agent.wait(timeout=240) == 0, agent.text()
    first, second = agents[0], agents[1]
    (stopped_at,) = {e["step"] for e in first.events("group_stop")}  # the two stopped together to let it in
    assert {e["step"] for e in second.events("group_stop")} == {stopped_at}
    assert [e["step"] for e in joined.events("resumed")] == [stopped_at], joined.text()
    assert [e["step"] for e in joined.events("step")][-1] == STEPS
    assert job_store(aws_env, bucket, job).latest_step() == STEPS


def test_an_own_command_runs_once_per_rank_with_torchruns_environment(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    report = ('echo "{\\"event\\": \\"env\\", \\"rank\\": $RANK, \\"world\\": $WORLD_SIZE, '
              '\\"local_rank\\": $LOCAL_RANK, \\"master\\": \\"$MASTER_ADDR:$MASTER_PORT\\"}"')
    job = f"multi-own-{bucket[-8:]}"
    with cluster(aws_env, bucket, job, tmp_path, nodes=2, command=report, min_nodes="2",
                 max_nodes="2") as group:
        for agent in group.agents:
            assert agent.wait(timeout=120) == 0, agent.text()
    seen = [event for agent in group.agents for event in agent.events("env")]
    assert sorted(e["rank"] for e in seen) == [0, 1]
    assert {(e["world"], e["local_rank"]) for e in seen} == {(2, 0)}
    assert len({e["master"] for e in seen}) == 1, "both ranks meet at rank 0's address"
    assert job_store(aws_env, bucket, job).get_json("status.json")["state"] == "DONE"


def test_a_hard_kill_during_the_replacements_join_leaves_the_others_training(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"multi-joinkill-{bucket[-8:]}"
    with cluster(aws_env, bucket, job, tmp_path, nodes=2, held=True) as group:
        first, second = group.agents
        train_a_while(group.agents)
        joining = group.add()
        # The two stop together to let it in; it dies before the bigger round has trained a step.
        first.wait_for(lambda: bool(first.events("group_stop")), timeout=120, what="the stop to let it in")
        joining.kill_tree()
        group.release()
        for agent in (first, second):
            assert agent.wait(timeout=240) == 0, agent.text()
    assert [e["step"] for e in first.events("step")][-1] == STEPS
    assert job_store(aws_env, bucket, job).latest_step() == STEPS
    (stopped_at,) = {e["step"] for e in first.events("group_stop")}
    assert stopped_at in [e["step"] for e in second.events("resumed")], "no completed step lost"



def test_several_nodes_stop_at_the_budget_and_record_it_once(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"multi-budget-{bucket[-8:]}"
    trace = tmp_path / "prices.json"  # g5.xlarge at a cent a second; each node booted a minute ago
    trace.write_text(json.dumps([{"type": "g5.xlarge", "az": "*", "time": 0, "price": 36.0}]))
    budget = 1.7  # $1.20 at the start; each node stops once $1.49 plus 10.5 s of both would reach it
    with cluster(aws_env, bucket, job, tmp_path, nodes=2, command=STEPPER, min_nodes="2", max_nodes="2",
                 budget_usd=str(budget), budget_check_seconds="0.5", grace_seconds="10", price_trace=str(trace),
                 launched_at=f"{time.time() - 60}") as group:
        for agent in group.agents:
            assert agent.wait(timeout=120) == 0, agent.text()
    store = job_store(aws_env, bucket, job)
    status = store.get_json("status.json")
    assert status["state"] == "STOPPED_BY_BUDGET" and "reaches its budget $1.70" in status["reason"], status
    assert len(store.events("budget")) == 1, "one record, one notification"
    for agent in group.agents:  # one node stopped the job; the other stopped on its own check or left on its record
        assert any(("stopped at the budget (" in line or "another node stopped the job at its budget" in line)
                   for line in agent.lines), agent.text()
    spent = job_spend(read_records(store)[0], TracePrices.from_file(trace), now=time.time()).usd
    assert spent <= budget, f"${spent:.4f} spent"
