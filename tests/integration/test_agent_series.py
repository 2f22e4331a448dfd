"""A script that saves `model_<epoch>.pth` each epoch and resumes from the largest number, under the
agent: each epoch reaches S3 once the next is saved (the last once the command exits), and after a
power-off and after a notice the replacement resumes from the newest epoch in S3."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures/plain_scripts/model_per_epoch.py"
EPOCHS = 9


def started(aws_env: dict[str, str], bucket: str, disk: Path, imds: FakeImds) -> AgentProcess:
    env = agent_env(aws_env, bucket=bucket, job="series", checkpoint_dir=disk, imds_url=imds.url,
                    instance_id=imds.instance_id, command=f"{sys.executable} {SCRIPT} {EPOCHS}", grace_seconds="10")
    return AgentProcess(env | {"OMP_NUM_THREADS": "1"}).start()


def resumed_from(agent: AgentProcess) -> int:
    [line] = [line for line in agent.lines if line.startswith("resuming from epoch")]
    return int(re.findall(r"\d+", line)[0])


def test_a_model_per_epoch_reaches_s3_and_resumes_after_a_power_off_and_a_notice(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "series")
    with FakeImds(instance_id="i-series-first") as imds:
        first = started(aws_env, bucket, tmp_path / "first", imds)
        # on its event, not on latest.json: the event follows the pointer, and a power-off between the
        # two would leave epoch 2 in S3 without the record this test counts
        first.power_off_when(lambda: any(event["step"] >= 2 for event in store.events("checkpoint")),
                             what="epoch 2 in S3")
    after_power_off = store.latest_step()
    with FakeImds(instance_id="i-series-second") as imds:
        second = started(aws_env, bucket, tmp_path / "second", imds)
        second.wait_for(lambda: (store.latest_step() or 0) > (after_power_off or 0), timeout=120,
                        what="an epoch past the power-off in S3")
        imds.announce_interruption(in_seconds=120)
        assert second.wait(timeout=60) == 0, second.text()
    after_notice = store.latest_step()
    with FakeImds(instance_id="i-series-third") as imds:
        third = started(aws_env, bucket, tmp_path / "third", imds)
        third.run_to_the_end(timeout=120)
    assert resumed_from(first) == 0
    assert resumed_from(second) == after_power_off, second.text()
    assert resumed_from(third) == after_notice, third.text()  # the epoch saved last before the notice
    assert f"finished at epoch {EPOCHS}" in third.lines, third.text()
    status = store.get_json("status.json")
    assert (status["state"], status["checkpoint_step"], status["warning"]) == ("DONE", EPOCHS, ""), status
    uploaded = sorted({event["step"] for event in store.events("checkpoint")})
    assert uploaded == list(range(1, EPOCHS + 1)), f"every epoch once in S3, not {uploaded}"
