"""What a person watching the job hears, through its SNS topic (moto, read back through an SQS
subscription): an interruption, the resume that follows and the end, one short message each; the
interruption also counts in the job's metrics, and each instance's record and spend are kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env
from tests.integration.test_agent_interruption import run_until_notice

TRAIN_ARGS = ("--model lm --synthetic --steps 40 --width 16 --context 16 --batch-size 8 "
              "--checkpoint-every-steps 10 --log-every 1 --min-step-seconds 0.1")


@pytest.fixture
def inbox(aws_env: dict[str, str], bucket: str) -> tuple[str, Any, str]:
    """A topic and a queue subscribed to it: (topic ARN, sqs client, queue URL)."""
    endpoint = aws_env["AWS_ENDPOINT_URL"]
    sns, sqs = boto3.client("sns", endpoint_url=endpoint), boto3.client("sqs", endpoint_url=endpoint)
    topic = sns.create_topic(Name=f"notify-{bucket[-8:]}")["TopicArn"]
    queue = sqs.create_queue(QueueName=f"inbox-{bucket[-8:]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    return topic, sqs, queue


def received(sqs: Any, queue: str) -> list[dict[str, str]]:
    found = []
    while messages := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
        found += [json.loads(message["Body"]) for message in messages]
        sqs.delete_message_batch(QueueUrl=queue, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
    return found


def test_interruption_resume_and_done_each_send_one_message(
        aws_env: dict[str, str], bucket: str, tmp_path: Path, inbox: tuple[str, Any, str]) -> None:
    topic, sqs, queue = inbox
    job = f"notify-{bucket[-8:]}"
    metrics = boto3.client("cloudwatch", endpoint_url=aws_env["AWS_ENDPOINT_URL"])
    settings = {"command": "builtin", "train_args": TRAIN_ARGS, "notify_topic": topic,
                "metrics_namespace": f"Test/{job}", "heartbeat_seconds": "0.5"}
    with FakeImds(instance_id="i-first") as imds:
        first = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "a",
                                       imds_url=imds.url, instance_id="i-first", **settings)).start()
        run_until_notice(first, imds, past_step=12)
    with FakeImds(instance_id="i-second") as imds:
        second = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "b",
                                        imds_url=imds.url, instance_id="i-second", **settings)).start()
        assert second.wait() == 0, second.text()

    subjects = [message["Subject"] for message in received(sqs, queue)]
    assert subjects == [f"Spot Trainer {job}: interrupted", f"Spot Trainer {job}: resumed",
                        f"Spot Trainer {job}: done"]
    names = {m["MetricName"] for m in metrics.list_metrics(Namespace=f"Test/{job}")["Metrics"]}
    assert {"Interruptions", "SpendUSD"} <= names
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    records = [store.get_json(f"instances/{iid}.json") for iid in ("i-first", "i-second")]
    assert all(record and record["stopped_at"] >= record["launched_at"] for record in records), records


def test_a_stop_for_a_pause_is_told_as_the_pause_and_not_counted_as_an_interruption(
        aws_env: dict[str, str], bucket: str, tmp_path: Path, inbox: tuple[str, Any, str]) -> None:
    topic, sqs, queue = inbox
    job = f"pause-{bucket[-8:]}"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job, instance="user")
    settings = {"command": "builtin", "train_args": TRAIN_ARGS, "notify_topic": topic,
                "metrics_namespace": f"Test/{job}"}
    with FakeImds(instance_id="i-paused") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "a",
                                       imds_url=imds.url, instance_id="i-paused", **settings)).start()
        try:
            agent.wait_for(lambda: any(e["step"] > 5 for e in agent.events("step")), what="step 5")
            store.append_event("paused")  # what `spot-trainer pause` records before it scales the group to zero
            imds.set_target_lifecycle_state("Terminated")
            assert agent.wait() == 0, agent.text()
        finally:
            agent.stop()
    messages = received(sqs, queue)
    assert [m["Subject"] for m in messages] == [f"Spot Trainer {job}: paused"], messages
    assert f"spot-trainer resume --job {job}" in messages[0]["Message"]
    assert store.get_json("status.json")["interruptions"] == 0
    [stop] = store.events("interruption")
    assert stop["paused"] is True
