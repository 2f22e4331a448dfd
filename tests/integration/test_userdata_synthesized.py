"""The exact user data of a synthesized launch template, its tokens resolved the way CloudFormation
resolves them at deploy time, run in the sandbox: the job that ships its own code (byo) gets its
code, its setup command and a running agent."""

from __future__ import annotations

import base64
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from localcloud.moto_server import MotoServer
from spot_trainer.agent.instance.config import config_from_env, parse_env_file
from tests.support.userdata_sandbox import REPO_ROOT, UserDataSandbox, alive, process_cmdline
from tests.unit.stack_support import synth

# A console user's choice of command; the byo script itself trains for real and is not needed here.
COMMAND = "python -c 'import signal, time; signal.signal(signal.SIGTERM, lambda *a: exit(75)); time.sleep(600)'"


def evaluate(node: Any, values: dict[str, str], conditions: dict[str, Any]) -> Any:
    """CloudFormation's meaning of the intrinsics CDK puts into user data."""
    if isinstance(node, str):
        return node
    (name, argument), = node.items()
    if name == "Ref":
        return values[argument]
    if name == "Fn::Join":
        separator, parts = argument
        return separator.join(evaluate(part, values, conditions) for part in parts)
    if name == "Fn::Split":
        separator, source = argument
        return evaluate(source, values, conditions).split(separator)
    if name == "Fn::Select":
        index, source = argument
        return evaluate(source, values, conditions)[int(index)]
    if name == "Fn::Base64":
        return base64.b64encode(str(evaluate(argument, values, conditions)).encode()).decode()
    if name == "Fn::If":
        condition, if_true, if_false = argument
        chosen = if_true if holds(conditions[condition], values, conditions) else if_false
        return evaluate(chosen, values, conditions)
    raise AssertionError(f"user data uses {name}, which this test does not resolve")


def holds(node: Any, values: dict[str, str], conditions: dict[str, Any]) -> bool:
    (name, argument), = node.items()
    if name == "Fn::Equals":
        return bool(evaluate(argument[0], values, conditions) == evaluate(argument[1], values, conditions))
    if name == "Fn::Not":
        return not holds(argument[0], values, conditions)
    if name == "Condition":
        return holds(conditions[argument], values, conditions)
    raise AssertionError(f"condition uses {name}, which this test does not resolve")


def zipped(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(directory.rglob("*")):
            archive.write(path, path.relative_to(directory).as_posix())
    return buffer.getvalue()


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, moto_server: MotoServer) -> Iterator[UserDataSandbox]:
    outdir = tmp_path_factory.mktemp("cdk.out")
    template = synth("byo", outdir).raw
    s3 = boto3.client("s3", endpoint_url=moto_server.endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    bucket = "userdata-synth-byo"
    s3.create_bucket(Bucket=bucket)
    values = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()}
    values["AWS::Region"] = "us-east-1"
    values["TrainingCommand"] = COMMAND
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::S3::Bucket":
            values[name] = bucket
        if resource["Type"] == "AWS::SNS::Topic":  # a Ref to a topic is its ARN
            values[name] = "arn:aws:sns:us-east-1:123456789012:spot-trainer-byo"
    for name in template["Parameters"]:  # the runtime and the code, published where their parameters say
        if name.startswith("AssetParameters") and "S3Bucket" in name:
            values[name] = bucket
        elif name.startswith("AssetParameters") and "S3VersionKey" in name:
            (staged,) = outdir.glob(f"asset.{name.removeprefix('AssetParameters')[:64]}*")
            key = f"{staged.name}.zip" if staged.is_dir() else staged.name
            values[name] = f"assets/||{key}"
            s3.put_object(Bucket=bucket, Key=f"assets/{key}",
                          Body=zipped(staged) if staged.is_dir() else staged.read_bytes())
    (launch_template,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    script = evaluate(launch_template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"], values,
                      template.get("Conditions", {}))
    with FakeImds(instance_id="i-0b0b0b0b0b0b0b0b0") as imds:
        # The runtime the stack ships, installed as on an instance: no package index at all.
        sandbox = UserDataSandbox(tmp_path_factory.mktemp("instance"), moto_server.env(), imds.url,
                                  overrides={"SPOT_PIP_ARGS": "--no-deps", "PIP_NO_INDEX": "1"})
        result = sandbox.run(script)
        assert result.returncode == 0, result.stderr
        try:
            yield sandbox
        finally:
            sandbox.stop_agent()


def test_synthesized_user_data_starts_the_agent_for_its_job(deployed: UserDataSandbox) -> None:
    config = config_from_env(parse_env_file(deployed.env_file))
    assert (config.job, config.bucket, config.command) == ("byo", "userdata-synth-byo", COMMAND)
    assert config.grace_seconds == 90.0 and config.log_group.endswith("byo")
    pid = deployed.wait_for_main_pid()
    assert alive(pid)
    assert process_cmdline(pid)[-5:] == ["-m", "spot_trainer", "agent", "--env-file", str(deployed.env_file)]


def test_synthesized_user_data_fetches_the_shipped_code_and_runs_setup(deployed: UserDataSandbox) -> None:
    work = deployed.root / "opt/spot-trainer/work"
    assert (work / "train.py").read_bytes() == (REPO_ROOT / "jobs/byo/train.py").read_bytes()
    log = deployed.log_file.read_text()
    assert "running in" in log and "pip install --quiet -r requirements.txt || true" in log
    assert (deployed.root / "var/lib/spot-trainer/setup-done").exists()
