"""A plain DDP script that prints nothing (tests/fixtures/plain_scripts/ddp_silent.py) on three nodes
with `min_nodes = 2` and a restart budget of one, through the three ways a spot node goes: a power-off
of the node that publishes, a power-off of one that does not, and a notice. Each time a replacement
joins. The job ends DONE at its last step: no lost node was taken for a failure of the script."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.integration.agent_runner import AgentProcess
from tests.integration.test_multinode import Cluster, cluster, job_store

STEPS = 150
SILENT_DDP = Path(__file__).resolve().parents[1] / "fixtures" / "plain_scripts" / "ddp_silent.py"


def alive(group: Cluster) -> list[AgentProcess]:
    return [agent for agent in group.agents if agent.process is not None and agent.process.poll() is None]


def publishing(group: Cluster, publishes: bool) -> AgentProcess:
    """A live node whose latest round makes it the publisher (or not), as its agent logged it."""
    def latest_round(agent: AgentProcess) -> str:
        return next((line for line in reversed(agent.lines) if "group rank" in line), "")
    found = [agent for agent in alive(group) if ("(publishes)" in latest_round(agent)) == publishes
             and latest_round(agent)]
    assert found, [agent.text() for agent in group.agents]
    return found[0]


def test_a_silent_ddp_script_survives_every_kind_of_lost_node(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"own-ddp-{bucket[-8:]}"
    store = job_store(aws_env, bucket, job)
    command = f"{sys.executable} {SILENT_DDP} --steps {STEPS} --save-every 10"
    with cluster(aws_env, bucket, job, tmp_path, command=command, restart_budget="1") as group:

        def after(step: int, what: str) -> int:
            deadline = time.monotonic() + 180
            while (store.latest_step() or 0) < step:
                assert time.monotonic() < deadline, f"no {what}:\n" + "\n".join(a.text() for a in group.agents)
                time.sleep(0.2)
            return store.latest_step() or 0

        reached = after(20, "step 20 in S3")
        publishing(group, True).kill_tree()  # power-off of the node that publishes
        group.add()
        reached = after(reached + 20, "training again after the publisher's loss")
        publishing(group, False).kill_tree()  # power-off of a node that does not
        group.add()
        reached = after(reached + 20, "training again after a non-publisher's loss")
        notified = publishing(group, False)
        notified.imds.announce_interruption(in_seconds=120)  # type: ignore[attr-defined]
        assert notified.wait(timeout=120) == 0, notified.text()
        for agent in alive(group):
            assert agent.wait(timeout=300) == 0, agent.text()
    assert store.get_json("status.json")["state"] == "DONE"
    assert store.latest_step() == STEPS
    ours = [line for agent in group.agents for line in agent.lines if line.startswith("spot-trainer:")]
    assert not [line for line in ours if "training failed" in line], "\n".join(ours)
    assert any("the world changed" in line for line in ours), "\n".join(ours)
