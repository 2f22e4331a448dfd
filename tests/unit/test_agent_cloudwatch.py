"""CloudWatch is best-effort: an unreachable or refusing endpoint never raises into training."""

from __future__ import annotations

import boto3
from botocore.config import Config

from spot_trainer.agent.records.cloudwatch import CloudWatchSink


def unreachable(service: str) -> object:
    return boto3.client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                        aws_access_key_id="x", aws_secret_access_key="x",
                        config=Config(retries={"max_attempts": 1}, connect_timeout=0.5))


def test_unreachable_endpoint_is_counted_and_warned_once(capsys) -> None:  # type: ignore[no-untyped-def]
    sink = CloudWatchSink(logs=unreachable("logs"), metrics=unreachable("cloudwatch"), log_group="/g",
                          log_stream="i-1", namespace="N", job="j")
    for round_ in range(2):
        sink.log(f"line {round_}")
        sink.metric("Step", round_)
        sink.flush()
    assert sink.failures == 4
    warnings = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 1 and "training goes on" in warnings[0]


def test_close_sends_what_is_buffered(aws_env: dict[str, str]) -> None:
    endpoint = aws_env["AWS_ENDPOINT_URL"]
    logs = boto3.client("logs", endpoint_url=endpoint)
    logs.create_log_group(logGroupName="/spot-trainer/unit")  # the stack's part
    sink = CloudWatchSink(logs=logs, metrics=boto3.client("cloudwatch", endpoint_url=endpoint),
                          log_group="/spot-trainer/unit", log_stream="i-unit", namespace="Unit/Sink",
                          job="unit", interval_seconds=60).start()
    sink.log("hello")
    sink.log("")  # CloudWatch rejects empty messages; the sink must not lose the batch over it
    sink.metric("Loss", 0.25)
    sink.close()
    events = logs.get_log_events(logGroupName="/spot-trainer/unit", logStreamName="i-unit")["events"]
    assert [e["message"] for e in events] == ["hello", " "] and sink.failures == 0
