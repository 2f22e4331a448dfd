"""Two agents for one job (a replacement starting while its predecessor drains): exactly one trains."""

from __future__ import annotations

import threading
from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import STEPPER, AgentProcess, agent_env
from tests.integration.test_agent_interruption import last_step


def watch_latest(store: RemoteStore, seen: list[int], stop: threading.Event) -> None:
    while not stop.wait(0.1):
        step = store.latest_step()
        if step is not None:
            seen.append(step)


def test_second_agent_waits_for_the_lease_and_latest_never_regresses(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "pair")
    seen: list[int] = []
    stop_watching = threading.Event()
    watcher = threading.Thread(target=watch_latest, args=(store, seen, stop_watching), daemon=True)
    with FakeImds(instance_id="i-a") as imds_a, FakeImds(instance_id="i-b") as imds_b:
        agents = {
            name: AgentProcess(agent_env(aws_env, bucket=bucket, job="pair", checkpoint_dir=tmp_path / name,
                                         imds_url=imds.url, instance_id=f"i-{name}", command=STEPPER))
            for name, imds in (("a", imds_a), ("b", imds_b))
        }
        watcher.start()
        try:
            for agent in agents.values():
                agent.start()
            for agent in agents.values():
                agent.wait_for(lambda a=agent: any("job lease" in line for line in a.lines),
                               what="lease decision")
            holders = [n for n, a in agents.items() if any("took the job lease" in line for line in a.lines)]
            assert len(holders) == 1, {n: a.text() for n, a in agents.items()}
            holder, waiter = agents[holders[0]], agents[({"a", "b"} - set(holders)).pop()]
            holder_imds = imds_a if holders[0] == "a" else imds_b
            holder.wait_for(lambda: any(e["step"] >= 20 for e in holder.events("step")),
                            what="holder training")
            assert waiter.events("step") == [], "the waiting agent must not train"
            holder_imds.announce_interruption(in_seconds=120)
            assert holder.wait() == 0, holder.text()
            handed_over_at = last_step(holder)
            waiter.wait_for(lambda: any(e["step"] > handed_over_at + 3 for e in waiter.events("step")),
                            what="takeover")
            (imds_b if holder is agents["a"] else imds_a).announce_interruption(in_seconds=120)
            assert waiter.wait() == 0, waiter.text()
        finally:
            stop_watching.set()
            for agent in agents.values():
                agent.stop()
    watcher.join()
    assert min(e["step"] for e in waiter.events("step")) == handed_over_at + 1
    started_training = waiter.first_time(lambda line: '"event": "step"' in line)
    holder_exited = holder.first_time(lambda line: "interrupted (" in line)
    assert started_training is not None and holder_exited is not None and started_training > holder_exited
    assert seen == sorted(seen) and seen[-1] == last_step(waiter), "latest.json only ever moves forward"
