"""The job's secrets reach the command's environment and nothing else the agent writes; one that does not
exist ends the job in one line that names it, with the group at zero."""

from __future__ import annotations

import hashlib
from pathlib import Path

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.node.endings import EXIT_FAILED
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env
from tests.integration.fleet import create_group, desired_capacity

TOKEN = "hf_s3cr3t-value-9f2c"
WANDB = "wandb-s3cr3t-77a1"


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


# Says whether each secret arrived, by its digest: neither the command's text nor its output holds a value.
COMMAND = (f'test "$(printf %s "$HF_TOKEN" | sha256sum | cut -d" " -f1)" = {digest(TOKEN)} && '
           f'test "$(printf %s "$WANDB_API_KEY" | sha256sum | cut -d" " -f1)" = {digest(WANDB)} && '
           'echo "secrets: arrived"')


@pytest.fixture
def secrets(aws_env: dict[str, str], bucket: str) -> str:
    """A SecureString and a Secrets Manager secret, named after the test's bucket; the SPOT_SECRETS text."""
    ssm = boto3.client("ssm", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    manager = boto3.client("secretsmanager", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    ssm.put_parameter(Name=f"/{bucket}/hf", Value=TOKEN, Type="SecureString")
    manager.create_secret(Name=f"{bucket}-wandb", SecretString=WANDB)
    return f"HF_TOKEN=ssm:/{bucket}/hf,WANDB_API_KEY=secretsmanager:{bucket}-wandb"


def run_agent(aws_env: dict[str, str], bucket: str, tmp_path: Path, refs: str, command: str
              ) -> tuple[AgentProcess, int]:
    """The agent run to its end; the group's desired capacity after it."""
    group = f"fleet-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group)
    with FakeImds(instance_id="i-secret") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job="sec", checkpoint_dir=tmp_path / "c",
                                       imds_url=imds.url, instance_id="i-secret", command=command,
                                       secrets=refs, asg_name=group, region="us-east-1")).start()
        try:
            agent.wait()
        finally:
            agent.stop()
    return agent, desired_capacity(autoscaling, group)


def test_secrets_reach_the_command_and_no_record(aws_env: dict[str, str], bucket: str, tmp_path: Path,
                                                 secrets: str) -> None:
    agent, _ = run_agent(aws_env, bucket, tmp_path, secrets, COMMAND)
    assert agent.process is not None and agent.process.returncode == 0, agent.text()
    assert "secrets: arrived" in agent.lines
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    store = RemoteStore(s3, bucket, "sec")
    assert store.get_json("status.json")["state"] == "DONE"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    everything = agent.text() + "".join(s3.get_object(Bucket=bucket, Key=k)["Body"].read().decode() for k in keys)
    logs = boto3.client("logs", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    everything += "".join(e["message"] for e in logs.filter_log_events(logGroupName="/spot-trainer/sec")["events"])
    assert "status.json" in "".join(keys) and "secrets: arrived" in everything
    assert TOKEN not in everything and WANDB not in everything


def test_a_secret_that_does_not_exist_ends_the_job_in_one_line(aws_env: dict[str, str], bucket: str,
                                                               tmp_path: Path) -> None:
    agent, desired = run_agent(aws_env, bucket, tmp_path, "HF_TOKEN=ssm:/no/such/parameter", "echo never")
    assert agent.process is not None and agent.process.returncode == EXIT_FAILED, agent.text()
    said = [line for line in agent.lines if "HF_TOKEN" in line]
    assert len(said) == 1 and said[0].endswith(
        "secret HF_TOKEN (ssm:/no/such/parameter) cannot be read: ParameterNotFound"), agent.text()
    assert "never" not in agent.lines
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    status = RemoteStore(s3, bucket, "sec").get_json("status.json")
    assert status["state"] == "FAILED" and "ParameterNotFound" in status["reason"]
    assert desired == 0
