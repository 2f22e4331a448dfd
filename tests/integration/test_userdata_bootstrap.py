"""The rendered current user data, run as an instance runs it: bash, a sandbox root, moto as AWS, a fake
IMDS, the systemctl stand-in really starting the agent. One bootstrap per module; the tests read
what it left behind, then run it again."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from localcloud.moto_server import MotoServer
from spot_trainer.agent.instance.config import ENV_NAMES, config_from_env, parse_env_file
from stacks.instance.user_data import render_user_data
from stacks.job.spec import CURRENT_USERDATA_VERSION
from tests.integration.test_runtime_shadowing import IMPOSTOR, IMPOSTORS
from tests.support.userdata_sandbox import (
    UNIT,
    UserDataSandbox,
    alive,
    asset_key,
    build_trainer_wheel,
    job_header,
    process_cmdline,
    process_environ,
    zip_files,
)

INSTANCE_ID = "i-0aa11bb22cc33dd44"
# The job's own code: records how the agent started it, then trains until told to stop (the contract:
# exit 0 only when finished).
TRAIN_PY = """\
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(75))  # stopped, not finished
keys = ("CHECKPOINT_DIR", "JOB_NAME", "JOB_ATTEMPT")
with open("started.json", "w") as out:
    json.dump({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in keys}}, out)
while True:
    time.sleep(0.2)
"""
# Quotes, a dollar sign and spaces must reach the command exactly as the user typed them.
COMMAND = """python train.py --note "it's \\"quoted\\"" --cost '$5' --epochs 3"""


def realistic_header(bucket: str, package_uri: str, code_uri: str) -> dict[str, str]:
    return job_header(
        bucket, package_uri, SPOT_COMMAND=COMMAND, SPOT_CODE_URI=code_uri, SPOT_GRACE_SECONDS="20",
        SPOT_CHECKPOINT_DIR="outputs",  # run.checkpoint_dir: where the script already saves, from its workdir
        SPOT_SETUP_COMMAND="echo setup-ran >> setup.log && test -f train.py"
        " && python -c 'import sys; print(sys.executable)' > python.txt",
    )


@dataclass
class Bootstrapped:
    sandbox: UserDataSandbox
    script: str
    first: object
    bucket: str
    s3: object
    started_at: float


@pytest.fixture(scope="module")
def aws(moto_server: MotoServer) -> dict[str, str]:
    return moto_server.env()


@pytest.fixture(scope="module")
def s3(aws: dict[str, str]):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3", endpoint_url=aws["AWS_ENDPOINT_URL"], region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )


@pytest.fixture(scope="module")
def trainer_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_trainer_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def imds() -> Iterator[FakeImds]:
    with FakeImds(instance_id=INSTANCE_ID, region="us-east-1") as server:
        yield server


@pytest.fixture(scope="module")
def booted(tmp_path_factory, aws, s3, trainer_wheel, imds) -> Iterator[Bootstrapped]:  # type: ignore[no-untyped-def]
    bucket = f"userdata-happy-{int(time.time() * 1000)}"
    s3.create_bucket(Bucket=bucket)
    package_key = asset_key(trainer_wheel)
    s3.upload_file(str(trainer_wheel), bucket, package_key)
    impostors = {name: IMPOSTOR for name in IMPOSTORS}  # the job's own files named like the runtime
    code = zip_files({"train.py": TRAIN_PY, **impostors}, tmp_path_factory.mktemp("code") / "code.zip")
    s3.upload_file(str(code), bucket, "cifar/code/code.zip")
    header = realistic_header(bucket, f"s3://{bucket}/{package_key}", f"s3://{bucket}/cifar/code/code.zip")
    script = render_user_data(CURRENT_USERDATA_VERSION, header)
    sandbox = UserDataSandbox(tmp_path_factory.mktemp("instance"), aws, imds.url)
    started_at = time.time()
    first = sandbox.run(script)
    try:
        yield Bootstrapped(sandbox, script, first, bucket, s3, started_at)
    finally:
        sandbox.stop_agent()


def test_bootstrap_succeeds_and_logs_version_and_job_first(booted: Bootstrapped) -> None:
    assert booted.first.returncode == 0, booted.first.stderr
    lines = booted.sandbox.log_file.read_text().splitlines()
    assert f"user data {CURRENT_USERDATA_VERSION} for job cifar" in lines[0]
    assert "STEP" not in lines[0]
    for step in ("instance-metadata", "python-env", "trainer-package", "job-code", "agent-service"):
        assert any(f"[{step}]: COMPLETED in" in line for line in lines), step
    assert json.loads(booted.sandbox.status_file.read_text())["state"] == "AGENT_STARTED"


def test_trainer_installed_beside_base_env_without_touching_torch(booted: Bootstrapped) -> None:
    lib = booted.sandbox.root / "opt/spot-trainer/lib"
    assert (lib / "spot_trainer" / "agent" / "supervisor.py").is_file()
    assert list(lib.glob("spot_trainer-*.dist-info"))
    assert not list(lib.glob("torch*")), "torch must come from the base env, never be reinstalled"


def test_env_file_is_the_agents_config(booted: Bootstrapped) -> None:
    env = parse_env_file(booted.sandbox.env_file)
    config = config_from_env(env)
    root = booted.sandbox.root
    assert (config.job, config.bucket, config.command) == ("cifar", booted.bucket, COMMAND)
    assert config.instance_id == INSTANCE_ID and config.region == "us-east-1"
    assert config.workdir == f"{root}/opt/spot-trainer/work"
    assert config.checkpoint_dir == f"{root}/opt/spot-trainer/work/outputs"
    assert Path(config.checkpoint_dir).is_dir()  # the agent refuses a folder it cannot write
    assert (config.grace_seconds, config.restart_budget, config.keep_checkpoints) == (20.0, 3, 3)
    assert env["PYTHONPATH"] == f"{root}/opt/spot-trainer/lib"
    header = realistic_header(booted.bucket, "", "")
    assert {name for name in header if name in ENV_NAMES and header[name]} <= set(env), "a setting was dropped"
    assert "SPOT_SETUP_COMMAND" not in env  # may span lines; only the bootstrap runs it
    assert env["AWS_ENDPOINT_URL"] == booted.sandbox.aws_env["AWS_ENDPOINT_URL"]
    assert env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] == booted.sandbox.imds_url


def test_unit_gives_the_agent_time_for_its_emergency_checkpoint(booted: Bootstrapped) -> None:
    unit = dict(
        line.split("=", 1) for line in booted.sandbox.unit_file.read_text().splitlines() if "=" in line
    )
    assert int(unit["TimeoutStopSec"]) > 20 + 30
    assert unit["Restart"] == "on-failure" and unit["KillMode"] == "mixed" and unit["KillSignal"] == "SIGTERM"
    assert unit["EnvironmentFile"] == str(booted.sandbox.env_file)
    assert unit["StandardOutput"] == unit["StandardError"] == "journal"


def test_started_process_is_the_agent_running_the_jobs_command(booted: Bootstrapped) -> None:
    sandbox = booted.sandbox
    pid = sandbox.wait_for_main_pid()
    assert process_cmdline(pid)[1:] == ["-P", "-m", "spot_trainer", "agent", "--env-file", str(sandbox.env_file)]
    environ = process_environ(pid)
    assert environ["SPOT_JOB"] == "cifar" and environ["PYTHONPATH"] == f"{sandbox.root}/opt/spot-trainer/lib"
    assert "AWS_ENDPOINT_URL" in environ  # from the env file, not inherited: the unit starts clean
    started = sandbox.root / "opt/spot-trainer/work/started.json"
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        assert alive(pid), f"agent exited; journal:\n{sandbox.read(sandbox.journal)}"
        time.sleep(0.2)
    record = json.loads(started.read_text())
    assert list(started.parent.rglob("hijacked-by-*")) == [], "a job file stood in for the runtime"
    assert record["argv"] == ["--note", 'it\'s "quoted"', "--cost", "$5", "--epochs", "3"]
    assert record["env"]["JOB_NAME"] == "cifar"
    assert record["env"]["CHECKPOINT_DIR"] == f"{sandbox.root}/opt/spot-trainer/work/outputs"


def test_code_fetched_and_setup_run_once(booted: Bootstrapped) -> None:
    work = booted.sandbox.root / "opt/spot-trainer/work"
    assert (work / "train.py").read_text() == TRAIN_PY
    assert (work / "setup.log").read_text() == "setup-ran\n"
    # What setup installs goes into a venv of the job's own over the image's env, not into the image's.
    assert (work / "python.txt").read_text().strip() == str(booted.sandbox.root / "opt/spot-trainer/venv/bin/python")


def test_second_run_is_a_no_op(booted: Bootstrapped) -> None:
    sandbox = booted.sandbox
    pid = sandbox.wait_for_main_pid()
    starts = sandbox.calls().count(f"restart {UNIT}")
    again = sandbox.run(booted.script)
    assert again.returncode == 0, again.stderr
    assert "agent already running and unchanged; nothing to do" in again.stderr
    assert "already installed from s3://" in again.stderr
    assert sandbox.calls().count(f"restart {UNIT}") == starts == 1
    assert sandbox.main_pid() == pid and alive(pid)
    assert (sandbox.root / "opt/spot-trainer/work/setup.log").read_text() == "setup-ran\n"


@pytest.mark.slow
def test_new_package_restarts_the_agent_once(booted: Bootstrapped, trainer_wheel: Path) -> None:
    sandbox = booted.sandbox
    old_pid = sandbox.wait_for_main_pid()
    booted.s3.upload_file(str(trainer_wheel), booted.bucket, "assets/republished.whl")  # type: ignore[attr-defined]
    header = realistic_header(booted.bucket, f"s3://{booted.bucket}/assets/republished.whl",
                              f"s3://{booted.bucket}/cifar/code/code.zip")
    result = sandbox.run(render_user_data(CURRENT_USERDATA_VERSION, header))
    assert result.returncode == 0, result.stderr
    new_pid = sandbox.wait_for_main_pid()
    assert new_pid != old_pid and alive(new_pid) and not alive(old_pid)
    assert sandbox.calls().count(f"restart {UNIT}") == 2
    assert (sandbox.root / "opt/spot-trainer/lib/.installed-from").read_text().strip().endswith("republished.whl")


def test_stop_ends_the_agent_and_everything_it_started(booted: Bootstrapped) -> None:
    sandbox = booted.sandbox
    pid = sandbox.wait_for_main_pid()
    assert sandbox.systemctl("is-active", UNIT).returncode == 0
    assert sandbox.systemctl("stop", UNIT).returncode == 0
    assert not alive(pid)
    assert sandbox.systemctl("is-active", UNIT).returncode == 3
