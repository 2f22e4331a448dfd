"""The three ways a spot node goes, played on a Cluster in turn: a power-off of the node that
publishes, a power-off of one that does not, and a notice to one. A replacement joins after each
power-off, and training must move on in S3 before the next loss.

Every wait here is bounded by progress, not by an assumed pace: it fails when the cluster shows
nothing new (no line from any node, no new step in S3) for STALL_SECONDS — a hang, on any machine —
or once the scenario has run MOST_SECONDS since its cluster started, and waits as long as a slow
machine keeps training until then."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess
from tests.integration.test_multinode import Cluster

STALL_SECONDS = 120.0  # nothing new from any node nor in S3 for this long is a hang
MOST_SECONDS = 900.0  # the whole scenario, from its cluster's start
# For the modules that play the three losses: above the suite's 300 s a test, since a loaded machine
# may well need more, and above the scenario's bound, so that a failure shows the nodes' logs.
TIMEOUT = pytest.mark.timeout(MOST_SECONDS + 300)


def wait_while_progressing(group: Cluster, store: RemoteStore, done: Callable[[], bool], what: str) -> None:
    """Until `done()`; an AssertionError with every node's log once the cluster stalls or runs too long."""
    last_change = time.monotonic()
    seen: tuple[int, int | None] | None = None
    while not done():
        now = time.monotonic()
        progress = (sum(len(agent.lines) for agent in group.agents), store.latest_step())
        if progress != seen:
            seen, last_change = progress, now
        if now - last_change > STALL_SECONDS or now - group.started_at > MOST_SECONDS:
            why = f"nothing new for {STALL_SECONDS:.0f} s" if now - last_change > STALL_SECONDS else "still going"
            raise AssertionError(f"{what}: {why}, {now - group.started_at:.0f} s into the scenario:\n"
                                 + "\n\n".join(agent.text() for agent in group.agents))
        time.sleep(0.2)


def alive(group: Cluster) -> list[AgentProcess]:
    return [agent for agent in group.agents if agent.process is not None and agent.process.poll() is None]


def publishing(group: Cluster, publishes: bool) -> AgentProcess:
    """A live node whose latest round makes it the publisher (or not), as its agent logged it."""
    found = [agent for agent in alive(group) if agent.publishes() == publishes
             and any("group rank" in line for line in agent.lines)]
    assert found, [agent.text() for agent in group.agents]
    return found[0]


def held(command: str, gates: Path, *steps: int) -> str:
    """`command` run with FIXTURE_HOLD_DIR=`gates`: a fixture script holds after each of these steps
    (tests/fixtures/plain_scripts/held.py) until lose_each_kind_of_node has injected a loss, the lowest
    step first. Hold where S3 has just reached the loss's step: there for a folder complete when it
    appears; one save later for a series of files, whose newest counts only once the next appears."""
    gates.mkdir(parents=True, exist_ok=True)
    for step in steps:
        (gates / f"hold-{step}").touch()
    return f"FIXTURE_HOLD_DIR={gates} {command}"


def lose_each_kind_of_node(group: Cluster, store: RemoteStore, *, first: int, gap: int,
                           gates: Path | None = None, after_each: Callable[[], None] = lambda: None) -> None:
    """Once S3 holds step `first`, each loss in turn, each after S3 has moved `gap` steps past the last.
    With `gates` (see `held`), the command waits at each of those steps until its loss is in.
    `after_each` checks what S3 holds each time training has moved on after a loss."""
    def after(step: int, what: str) -> int:
        wait_while_progressing(group, store, lambda: (store.latest_step() or 0) >= step, f"no {what}")
        after_each()
        return store.latest_step() or 0

    def release() -> None:
        """The loss is in: the lowest hold still closed opens."""
        closed = sorted(gates.glob("hold-*"), key=lambda gate: int(gate.name.removeprefix("hold-"))) if gates else []
        if closed:
            closed[0].unlink()

    reached = after(first, f"step {first} in S3")
    publishing(group, True).kill_tree()  # power-off of the node that publishes
    group.add()
    release()
    reached = after(reached + gap, "training again after the publisher's loss")
    publishing(group, False).kill_tree()  # power-off of a node that does not
    group.add()
    release()
    reached = after(reached + gap, "training again after a non-publisher's loss")
    notified = publishing(group, False)
    notified.imds.announce_interruption(in_seconds=120)  # type: ignore[attr-defined]
    notified.wait_for(lambda: any("stopping the command" in line for line in notified.lines), timeout=120,
                      what="the notice taken")
    release()
    assert notified.wait(timeout=120) == 0, notified.text()


def no_lost_node_was_a_failure(group: Cluster) -> None:
    ours = [line for agent in group.agents for line in agent.lines if line.startswith("spot-trainer:")]
    assert not [line for line in ours if "training failed" in line], "\n".join(ours)
    assert any("the world changed" in line for line in ours), "\n".join(ours)


def every_node_finishes(group: Cluster, store: RemoteStore) -> None:
    """Each node still running ends cleanly, as long as the cluster keeps making progress."""
    running = alive(group)
    wait_while_progressing(group, store, lambda: not alive(group), "the nodes did not finish")
    codes = [agent.wait(timeout=10) for agent in running]
    assert codes == [0] * len(running), f"nodes ended with {codes}:\n" + "\n\n".join(a.text() for a in group.agents)
