"""Capacity watch, a Lambda run each minute: when no instance of the job has run for MAX_SPOT_WAIT,
or none runs while the job is behind its line to the deadline, no agent can act: this switches the
group to on-demand. Inlined in the template: stdlib and boto3 only."""
import json
import os
import re
import time
from datetime import UTC, datetime
from typing import Any

import boto3

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def seconds(text: str | None) -> float | None:
    """'1d12h' -> 129600.0; '' -> None (the job file's duration forms)."""
    parts = re.findall(r"(\d+)([dhms])", text or "")
    return float(sum(int(n) * UNITS[u] for n, u in parts)) if parts else None


def read_status(s3: Any, bucket: str, job: str) -> dict[str, Any]:
    try:
        return dict(json.loads(s3.get_object(Bucket=bucket, Key=f"{job}/status.json")["Body"].read()))
    except s3.exceptions.NoSuchKey:
        return {}


def last_seen(s3: Any, bucket: str, job: str, group: dict[str, Any]) -> float:
    """When an instance of the job last reported, or the group was created."""
    seen: float = group["CreatedTime"].timestamp()
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{job}/instances/")
    for page in pages:
        for item in page.get("Contents", []):
            seen = max(seen, item["LastModified"].timestamp())
    return seen


def behind_line(status: dict[str, Any], now: float) -> bool:
    """A margin below the line from the first start to deadline - margin (as in policy.py)."""
    try:
        start, margin = status["first_started_at"], status["margin_seconds"]
        due = status["total_steps"] * (now - margin - start) / (status["deadline_at"] - margin - start)
        return bool((status.get("step") or 0) < due)
    except (KeyError, TypeError, ZeroDivisionError):
        return False  # no agent has run yet, or no deadline


def reason_to_switch(status: dict[str, Any], waited: float, now: float) -> str | None:
    wait = seconds(os.environ.get("MAX_SPOT_WAIT"))
    if wait is not None and waited >= wait:
        return f"no instance has run for {waited / 60:.0f} min (max_spot_wait {wait / 60:.0f} min)"
    if waited >= float(os.environ.get("QUIET_SECONDS", "180")) and behind_line(status, now):
        return f"no instance runs and the job is behind its line to the deadline at step {status.get('step')}"
    return None


def record(s3: Any, bucket: str, job: str, reason: str, now: float) -> None:
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    event = {"kind": "market", "time": stamp, "epoch": now, "instance": "capacity-watch",
             "from": "spot", "to": "on-demand", "reason": reason}
    s3.put_object(Bucket=bucket, Key=f"{job}/events/{stamp}-capacity-watch-market.json",
                  Body=json.dumps(event).encode())


def handler(event: Any, context: Any) -> str:
    env = os.environ
    group_name, bucket, job, now = env["GROUP_NAME"], env["BUCKET"], env["JOB"], time.time()
    asg, s3 = boto3.client("autoscaling"), boto3.client("s3")
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group_name])["AutoScalingGroups"][0]
    share = group["MixedInstancesPolicy"]["InstancesDistribution"].get("OnDemandPercentageAboveBaseCapacity", 0)
    status = read_status(s3, bucket, job)
    if group["DesiredCapacity"] == 0 or share == 100 or status.get("state") in ("DONE", "FAILED"):
        return "nothing to do"
    reason = reason_to_switch(status, now - last_seen(s3, bucket, job, group), now)
    if reason is None:
        return "spot is fine"
    asg.update_auto_scaling_group(AutoScalingGroupName=group_name, MixedInstancesPolicy={
        "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 100}})
    record(s3, bucket, job, reason, now)
    if env.get("TOPIC_ARN"):
        boto3.client("sns").publish(TopicArn=env["TOPIC_ARN"], Subject=f"Spot Trainer {job}: on-demand",
                                    Message=f"Job {job} switched to on-demand: {reason}.")
    print(f"on-demand: {reason}")
    return reason
