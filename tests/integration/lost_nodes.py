"""The three ways a spot node goes, played on a Cluster in turn: a power-off of the node that
publishes, a power-off of one that does not, and a notice to one. A replacement joins after each
power-off, and training must move on in S3 before the next loss."""

from __future__ import annotations

import subprocess
import time

from spot_trainer.storage.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess
from tests.integration.test_multinode import Cluster


def alive(group: Cluster) -> list[AgentProcess]:
    return [agent for agent in group.agents if agent.process is not None and agent.process.poll() is None]


def publishing(group: Cluster, publishes: bool) -> AgentProcess:
    """A live node whose latest round makes it the publisher (or not), as its agent logged it."""
    found = [agent for agent in alive(group) if agent.publishes() == publishes
             and any("group rank" in line for line in agent.lines)]
    assert found, [agent.text() for agent in group.agents]
    return found[0]


def lose_each_kind_of_node(group: Cluster, store: RemoteStore, *, first: int, gap: int, timeout: float = 180) -> None:
    """Once S3 holds step `first`, each loss in turn, each after S3 has moved `gap` steps past the last."""
    def after(step: int, what: str) -> int:
        deadline = time.monotonic() + timeout
        while (store.latest_step() or 0) < step:
            assert time.monotonic() < deadline, f"no {what}:\n" + "\n".join(a.text() for a in group.agents)
            time.sleep(0.2)
        return store.latest_step() or 0

    reached = after(first, f"step {first} in S3")
    publishing(group, True).kill_tree()  # power-off of the node that publishes
    group.add()
    reached = after(reached + gap, "training again after the publisher's loss")
    publishing(group, False).kill_tree()  # power-off of a node that does not
    group.add()
    after(reached + gap, "training again after a non-publisher's loss")
    notified = publishing(group, False)
    notified.imds.announce_interruption(in_seconds=120)  # type: ignore[attr-defined]
    assert notified.wait(timeout=120) == 0, notified.text()


def no_lost_node_was_a_failure(group: Cluster) -> None:
    ours = [line for agent in group.agents for line in agent.lines if line.startswith("spot-trainer:")]
    assert not [line for line in ours if "training failed" in line], "\n".join(ours)
    assert any("the world changed" in line for line in ours), "\n".join(ours)


def every_node_finishes(group: Cluster, timeout: float = 150) -> None:
    """Each node still running ends cleanly within `timeout` seconds; else every node's log is shown."""
    deadline = time.monotonic() + timeout
    for agent in alive(group):
        try:
            code = agent.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        assert code == 0, f"a node ended with {code}:\n" + "\n\n".join(a.text() for a in group.agents)
