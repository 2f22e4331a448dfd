"""The end of a job on several nodes. Two nodes finish together and the publisher's final upload is held:
the node that does not publish leaves the job to the publisher. The group keeps its capacity and the job
is not DONE until the final step is in S3; then both nodes leave, each naming the step the publisher
published (real agents, moto's S3 and Auto Scaling behind a proxy that holds the final checkpoint's
writes). Then that node's agent alone, its wait bounded short: no end in time, a notice, a scale-in."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from localcloud.moto_server import MotoServer
from spot_trainer.agent.instance.config import AgentConfig
from spot_trainer.agent.instance.imds import ImdsClient
from spot_trainer.agent.records.status import DONE, INTERRUPTED, JobStatus, StatusReporter
from spot_trainer.agent.several_nodes import endings as several_endings
from spot_trainer.agent.supervisor import Agent, Clients
from spot_trainer.storage.s3 import job_keys
from spot_trainer.storage.s3.lease import Lease
from spot_trainer.storage.steps.remote import RemoteStore
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.agent_runner import AgentProcess
from tests.integration.fleet import create_group, desired_capacity
from tests.integration.test_multinode import cluster, job_store
from tests.support.s3_proxy import FaultProxy

FINAL = 20
# Rank 0 (on the node that publishes: one worker per node) saves steps 10 and 20; every rank then exits 0,
# and torchrun lets the nodes' commands end together.
COMMAND = ('save() { echo "$1" > "$CHECKPOINT_DIR/.t"; mv "$CHECKPOINT_DIR/.t" "$CHECKPOINT_DIR/step-$1"; }; '
           f'if [ "$RANK" = 0 ]; then save 10; save {FINAL}; fi')


class FinalUploadGate:
    """Holds every write of the final checkpoint's objects until `open()` (bounded, so a failed test ends)."""

    def __init__(self, job: str) -> None:
        self.prefix = f"{job}/{job_keys.checkpoint_prefix(FINAL)}"
        self.caught, self.opened = threading.Event(), threading.Event()

    def __call__(self, key: str) -> None:
        if key.startswith(self.prefix):
            self.caught.set()
            self.opened.wait(timeout=120)

    def open(self) -> None:
        self.opened.set()


@pytest.fixture
def job(bucket: str) -> str:
    return f"multi-finish-{bucket[-8:]}"


@pytest.fixture
def gate(job: str) -> Iterator[FinalUploadGate]:
    held = FinalUploadGate(job)
    yield held
    held.open()


@pytest.fixture
def held_env(moto_server: MotoServer, aws_env: dict[str, str], gate: FinalUploadGate) -> Iterator[dict[str, str]]:
    with FaultProxy(moto_server.port, before_write=gate) as proxy:
        yield {**aws_env, "AWS_ENDPOINT_URL": proxy.endpoint}


def last_agent_line(agent: AgentProcess) -> str:
    return next(line for line in reversed(agent.lines) if line.startswith("spot-trainer: "))


def wait_until(predicate: Callable[[], bool], what: str, agents: list[AgentProcess], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n" + "\n---\n".join(
            agent.text() for agent in agents)
        time.sleep(0.05)


def test_a_node_whose_command_ends_with_the_publishers_waits_for_its_final_upload(
    aws_env: dict[str, str], held_env: dict[str, str], gate: FinalUploadGate, job: str, bucket: str,
    tmp_path: Path
) -> None:
    group_name = f"finish-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group_name)
    store = job_store(aws_env, bucket, job)
    with cluster(held_env, bucket, job, tmp_path, nodes=2, command=COMMAND, min_nodes="2", max_nodes="2",
                 asg_name=group_name) as group:
        agents = group.agents
        wait_until(gate.caught.is_set, "the publisher's final upload", agents)
        (other,) = [agent for agent in agents if not agent.publishes()]
        # Its command has ended too: it waits for the publisher, or (as it must not) it has left.
        wait_until(lambda: any("waiting up to" in line for line in other.lines) or other.process is None
                   or other.process.poll() is not None, "the other node acting on its command's end", agents)
        assert desired_capacity(autoscaling, group_name) == 1, other.text()
        assert (store.read_record("status.json") or {}).get("state") != "DONE", other.text()
        assert other.process is not None and other.process.poll() is None, other.text()
        gate.open()
        for agent in agents:
            assert agent.wait(timeout=120) == 0, agent.text()
    assert store.latest_step() == FINAL
    assert store.get_json("status.json")["state"] == "DONE"
    assert desired_capacity(autoscaling, group_name) == 0
    assert [event["step"] for event in store.events("done")] == [FINAL]
    for agent in agents:
        assert f"checkpoint step {FINAL}" in last_agent_line(agent), agent.text()


def finished_non_publisher(aws_env: dict[str, str], bucket: str, job: str, imds: FakeImds, group_name: str) -> Agent:
    """The agent of a node that does not publish, as it is once its command has exited 0: its grace period
    short, and (the test's monkeypatch) no allowance beyond it for the publisher's final upload."""
    endpoint = aws_env["AWS_ENDPOINT_URL"]
    s3 = boto3.client("s3", endpoint_url=endpoint)
    config = AgentConfig(job=job, bucket=bucket, command="true", distributed=True, min_nodes=2, max_nodes=2,
                         grace_seconds=0.5, poll_seconds=0.1, asg_name=group_name)
    clients = Clients(store=RemoteStore(s3, bucket, job, instance="i-other"),
                      lease=Lease(s3, bucket, job, owner="i-other"), imds=ImdsClient(imds.url),
                      autoscaling=boto3.client("autoscaling", endpoint_url=endpoint), cloud=None)
    agent = Agent(config=config, clients=clients, instance_id="i-other")
    agent.telemetry.reporter = StatusReporter(JobStatus.carried_over(None, job, "i-other"),
                                              publish=agent.telemetry.publish_status)
    return agent


@pytest.fixture
def no_allowance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(several_endings, "FINAL_UPLOAD_ALLOWANCE_SECONDS", 0.0)


def test_no_end_from_the_publisher_within_the_bound_is_no_done_and_no_scale_in(
    aws_env: dict[str, str], bucket: str, job: str, tmp_path: Path, no_allowance: None,
    capsys: pytest.CaptureFixture[str]
) -> None:
    group_name = f"unended-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group_name)
    with FakeImds(instance_id="i-other") as imds:
        agent = finished_non_publisher(aws_env, bucket, job, imds, group_name)
        (tmp_path / "step-10").write_text("10")
        assert agent.clients.store.upload(tmp_path / "step-10", 10) is UploadOutcome.PUBLISHED
        assert agent.endings.after_the_publisher() == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "recorded no end of the job" in line]
    assert len(lines) == 1 and "newest step in S3: 10" in lines[0] and "not marked DONE" in lines[0], lines
    assert desired_capacity(autoscaling, group_name) == 1
    store = agent.clients.store
    assert store.get_json("status.json")["state"] != DONE
    assert store.events("done") == []
    assert "recorded no end of the job" in store.get_json("status.json")["warning"]


def test_a_notice_while_waiting_for_the_publisher_is_this_nodes_interruption(
    aws_env: dict[str, str], bucket: str, job: str, no_allowance: None
) -> None:
    group_name = f"noticed-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group_name)
    with FakeImds(instance_id="i-other") as imds:
        agent = finished_non_publisher(aws_env, bucket, job, imds, group_name)
        imds.announce_interruption(in_seconds=120)
        assert agent.endings.after_the_publisher() == 0
    assert desired_capacity(autoscaling, group_name) == 1
    assert agent.clients.store.get_json("status.json")["state"] == INTERRUPTED


def test_the_scale_in_after_the_publishers_end_is_no_interruption(
    aws_env: dict[str, str], bucket: str, job: str, no_allowance: None, capsys: pytest.CaptureFixture[str]
) -> None:
    group_name = f"scaled-{bucket[-8:]}"
    create_group(aws_env, group_name)
    with FakeImds(instance_id="i-other") as imds:
        agent = finished_non_publisher(aws_env, bucket, job, imds, group_name)
        publisher = RemoteStore(agent.clients.store.s3, bucket, job, instance="i-publisher")
        publisher.append_event("done", step=30)
        imds.set_target_lifecycle_state("Terminated")  # the publisher scaled the group to zero
        assert agent.endings.after_the_publisher() == 0
    assert agent.clients.store.get_json("status.json")["state"] == DONE
    assert "another node finished the job at checkpoint step 30; this one leaves too" in capsys.readouterr().err
