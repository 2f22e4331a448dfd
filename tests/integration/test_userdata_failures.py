"""User data that cannot finish: it stops within bounded time, names the failing step and why in its
log, in the local status file and in the job's status.json, and starts nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.fake_imds import FakeImds
from localcloud.moto_server import MotoServer, free_port
from spot_trainer.agent.failed_record import failed_record
from stacks.instance.user_data import render_user_data
from stacks.job.spec import CURRENT_USERDATA_VERSION as CURRENT
from tests.integration.fleet import create_group, desired_capacity
from tests.support.userdata_sandbox import UserDataSandbox, asset_key, build_trainer_wheel, job_header

INSTANCE_ID = "i-0fa11ed0000000001"


@pytest.fixture
def imds() -> Iterator[FakeImds]:
    with FakeImds(instance_id=INSTANCE_ID) as server:
        yield server


@pytest.fixture
def sandbox(tmp_path: Path, moto_server: MotoServer, imds: FakeImds) -> Iterator[UserDataSandbox]:
    box = UserDataSandbox(tmp_path / "instance", moto_server.env(), imds.url)
    yield box
    box.stop_agent()


def run_failing(sandbox: UserDataSandbox, script: str) -> tuple[object, float, list[str]]:
    started = time.monotonic()
    result = sandbox.run(script, timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode != 0, result.stderr
    return result, elapsed, sandbox.log_file.read_text().splitlines()


def error_line(log: list[str]) -> str:
    return next(line for line in log if "]: ERROR (exit" in line)


def assert_nothing_started(sandbox: UserDataSandbox) -> None:
    assert not sandbox.unit_file.exists()
    assert sandbox.calls() == []


def test_missing_package_in_s3_fails_after_retries_and_records_why(
    sandbox: UserDataSandbox, s3, bucket: str  # type: ignore[no-untyped-def]
) -> None:
    # An agent of this job already recorded progress: the failure must not erase it.
    s3.put_object(Bucket=bucket, Key="cifar/status.json", Body=json.dumps({"state": "INTERRUPTED", "step": 740,
                                                                           "interruptions": 2}))
    package = f"s3://{bucket}/assets/0123abcd.whl"
    group = f"boot-{bucket[-8:]}"
    autoscaling = create_group(sandbox.aws_env, group)
    header = job_header(bucket, package, SPOT_ASG_NAME=group)
    result, elapsed, log = run_failing(sandbox, render_user_data(CURRENT, header))
    assert elapsed < 60
    retried = [line for line in log if f"download of {package}: attempt" in line]
    assert [line.split("attempt ")[1][:3] for line in retried] == ["1/3", "2/3"]
    error = error_line(log)
    assert "[trainer-package]" in error and f"download of {package} failed after 3 attempts" in error
    assert "404" in error or "Not Found" in error or "does not exist" in error
    local = json.loads(sandbox.status_file.read_text())
    assert local["state"] == "FAILED" and local["bootstrap"]["step"] == "trainer-package"
    remote = json.loads(s3.get_object(Bucket=bucket, Key="cifar/status.json")["Body"].read())
    assert remote["state"] == "FAILED" and remote["instance"] == INSTANCE_ID
    assert remote["reason"].startswith(f"bootstrap step trainer-package: download of {package} failed")
    assert (remote["step"], remote["interruptions"]) == (740, 2)
    uploaded_log = s3.get_object(Bucket=bucket, Key=f"cifar/bootstrap/{INSTANCE_ID}.log")["Body"].read().decode()
    assert "ERROR" in uploaded_log
    assert "Traceback" not in result.stderr
    assert_nothing_started(sandbox)
    assert desired_capacity(autoscaling, group) == 0, "a job whose instances cannot boot must stop paying"


def test_a_failure_once_the_runtime_is_installed_is_recorded_by_the_runtimes_own_code(  # type: ignore[no-untyped-def]
    sandbox: UserDataSandbox, s3, bucket: str, tmp_path: Path
) -> None:
    wheel = build_trainer_wheel(tmp_path)
    s3.upload_file(str(wheel), bucket, asset_key(wheel))
    s3.put_object(Bucket=bucket, Key="code/job.zip", Body=b"not a zip")
    s3.put_object(Bucket=bucket, Key="cifar/status.json", Body=json.dumps({"state": "INTERRUPTED", "step": 740,
                                                                           "failures": 1}))
    # No python3 but the runtime's: the script's own fallback cannot be what writes the record.
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    (stand_in / "python3").write_text("#!/bin/sh\nexit 97\n")
    (stand_in / "python3").chmod(0o755)
    sandbox.overrides["PATH"] = f"{stand_in}:{sandbox.env()['PATH']}"
    header = job_header(bucket, f"s3://{bucket}/{asset_key(wheel)}", SPOT_CODE_URI=f"s3://{bucket}/code/job.zip")
    _, _, log = run_failing(sandbox, render_user_data(CURRENT, header))
    assert "[job-code]" in error_line(log)
    remote = json.loads(s3.get_object(Bucket=bucket, Key="cifar/status.json")["Body"].read())
    assert set(remote) == set(failed_record(None, "cifar", INSTANCE_ID, "")) | {"bootstrap"}
    assert (remote["state"], remote["failures"], remote["step"], remote["instance"]) == ("FAILED", 2, 740, INSTANCE_ID)
    assert remote["reason"].startswith(f"bootstrap step job-code: s3://{bucket}/code/job.zip is not a readable zip")
    assert_nothing_started(sandbox)


def test_unreachable_package_index_fails_in_bounded_time(sandbox: UserDataSandbox, s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    closed = f"http://127.0.0.1:{free_port()}/simple"
    sandbox.overrides["SPOT_PIP_ARGS"] = f"--no-deps --index-url {closed} --retries 0 --timeout 2"
    result, elapsed, log = run_failing(sandbox, render_user_data(CURRENT, job_header(bucket, "spot-trainer==0.1.0")))
    assert elapsed < 90
    error = error_line(log)
    assert "[trainer-package]" in error and "pip install of spot-trainer==0.1.0 failed after 3 attempts" in error
    remote = json.loads(s3.get_object(Bucket=bucket, Key="cifar/status.json")["Body"].read())
    assert remote["state"] == "FAILED" and "pip install of spot-trainer==0.1.0" in remote["reason"]
    assert_nothing_started(sandbox)


@pytest.mark.slow
def test_object_that_is_not_a_wheel_is_named(sandbox: UserDataSandbox, s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    s3.put_object(Bucket=bucket, Key="assets/feedbeef.whl", Body=b"<html>not a wheel</html>")
    package = f"s3://{bucket}/assets/feedbeef.whl"
    _, _, log = run_failing(sandbox, render_user_data(CURRENT, job_header(bucket, package)))
    error = error_line(log)
    assert error.endswith(f"{package} is not a wheel (no .dist-info/WHEEL inside)")
    assert_nothing_started(sandbox)


def test_unreachable_imds_fails_at_instance_metadata(tmp_path: Path, s3, bucket: str, moto_server: MotoServer) -> None:  # type: ignore[no-untyped-def]
    sandbox = UserDataSandbox(tmp_path / "instance", moto_server.env(), f"http://127.0.0.1:{free_port()}")
    result, elapsed, log = run_failing(sandbox, render_user_data(CURRENT, job_header(bucket, "spot-trainer==0.1.0")))
    assert elapsed < 60
    error = error_line(log)
    assert "[instance-metadata]" in error and "IMDS instance-id failed after 3 attempts" in error
    assert json.loads(sandbox.status_file.read_text())["bootstrap"]["step"] == "instance-metadata"
    assert "Traceback" not in result.stderr
    assert_nothing_started(sandbox)


@pytest.mark.slow
def test_without_a_pytorch_env_a_venv_is_made_and_its_torch_install_is_retried(  # type: ignore[no-untyped-def]
    sandbox: UserDataSandbox, s3, bucket: str
) -> None:
    # No Deep Learning AMI env and no reachable index: the fallback venv cannot get torch.
    sandbox.overrides.update(
        SPOT_BASE_PYTHON="", SPOT_PYTHON_CANDIDATES="/nonexistent/python3", PIP_NO_INDEX="1", SPOT_FAKE_GPU_COUNT="1"
    )
    result, elapsed, log = run_failing(sandbox, render_user_data(CURRENT, job_header(bucket, "spot-trainer==0.1.0")))
    assert elapsed < 90
    assert any("GPUs: NVIDIA A10G" in line for line in log)
    assert (sandbox.root / "opt/spot-trainer/venv/bin/python3").exists()
    error = error_line(log)
    assert "[python-env]" in error and "install of torch==2.13.0 failed after 3 attempts" in error
    assert_nothing_started(sandbox)
