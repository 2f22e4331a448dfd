"""The environment cache, played by instances booting one after another against one bucket (moto): the
first builds the job's environment (a venv over the image's PyTorch env, with what its setup installs
from requirements.txt) and stores it; the next restores it instead of installing; a damaged archive
makes one instance install, say so, and repair the cache for the ones after it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from localcloud.moto_server import MotoServer
from localcloud.wheels import make_wheel
from spot_trainer.environment.remote import write_record
from stacks.instance.user_data import render_user_data
from stacks.job.spec import CURRENT_USERDATA_VERSION
from tests.support.userdata_sandbox import UserDataSandbox, asset_key, build_trainer_wheel, job_header, zip_files

SETUP = "pip install -q -r requirements.txt && echo ran >> setup.log"


@dataclass
class Job:
    aws: dict[str, str]
    s3: Any
    bucket: str
    header: dict[str, str]
    wheels: Path
    folder: Path

    def boot(self, name: str) -> tuple[UserDataSandbox, str]:
        """One instance's user data, run to the end; its bootstrap log."""
        with FakeImds(instance_id=f"i-0{name:0>16}", ami_id="ami-0feedface0000001") as imds:
            sandbox = UserDataSandbox(self.folder / name, self.aws, imds.url, overrides={
                "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheels)})
            result = sandbox.run(render_user_data(CURRENT_USERDATA_VERSION, self.header))
            sandbox.stop_agent()
        assert result.returncode == 0, sandbox.read(sandbox.log_file)
        return sandbox, stored_or_restored(sandbox)

    def objects(self) -> dict[str, int]:
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix="cifar/env-cache/").get("Contents", [])
        return {item["Key"]: item["Size"] for item in listed}

    def record(self) -> tuple[str, dict[str, Any]]:
        (key,) = [k for k in self.objects() if k.endswith("/env.json")]
        return key, json.loads(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())


def stored_or_restored(sandbox: UserDataSandbox, timeout: float = 60) -> str:
    """The bootstrap log once the environment is restored, or stored by the packing user data leaves
    running in the background."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = sandbox.log_file.read_text()
        if "environment restored from" in log or "[env-store]: environment stored in" in log \
                or "[env-store]: environment cache: " in log:
            return log
        time.sleep(0.1)
    raise AssertionError(f"neither restored nor stored in {timeout}s:\n{sandbox.log_file.read_text()}")


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, moto_server: MotoServer) -> Job:
    folder = tmp_path_factory.mktemp("env-cache")
    aws = moto_server.env()
    s3 = boto3.client("s3", endpoint_url=aws["AWS_ENDPOINT_URL"], region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    bucket = f"env-cache-{int(time.time() * 1000)}"
    s3.create_bucket(Bucket=bucket)
    wheel = build_trainer_wheel(folder)
    s3.upload_file(str(wheel), bucket, asset_key(wheel))
    wheels = folder / "wheels"  # the job's requirements, as a package index would serve them
    make_wheel(wheels, "jobdep", "1.0", payload_bytes=2_000_000, requires=("jobdep-extra",))
    make_wheel(wheels, "jobdep-extra", "1.0", payload_bytes=500_000)
    code = zip_files({"requirements.txt": "jobdep==1.0\n"}, folder / "code.zip")
    s3.upload_file(str(code), bucket, "cifar/code/code.zip")
    header = job_header(bucket, f"s3://{bucket}/{asset_key(wheel)}", SPOT_COMMAND="sleep 60",
                        SPOT_CODE_URI=f"s3://{bucket}/cifar/code/code.zip", SPOT_SETUP_COMMAND=SETUP)
    return Job(aws, s3, bucket, header, wheels, folder)


@pytest.fixture(scope="module")
def first(job: Job) -> tuple[UserDataSandbox, str]:
    return job.boot("first")


@pytest.fixture(scope="module")
def replacement(job: Job, first: tuple[UserDataSandbox, str]) -> tuple[UserDataSandbox, str]:
    return job.boot("replacement")


def imports_jobdep(sandbox: UserDataSandbox) -> str:
    venv_python = sandbox.root / "opt/spot-trainer/venv/bin/python3"
    return subprocess.run([str(venv_python), "-c", "import jobdep, jobdep_extra, torch; print(jobdep.__version__)"],
                          capture_output=True, text=True, timeout=60, env={"PATH": os.defpath}).stdout.strip()


def test_the_first_instance_installs_and_stores_the_environment(job: Job, first: tuple[UserDataSandbox, str]) -> None:
    sandbox, log = first
    assert "[env-restore]: environment cache: none yet for key" in log, log
    assert (sandbox.root / "opt/spot-trainer/work/setup.log").read_text() == "ran\n"
    assert imports_jobdep(sandbox) == "1.0"
    assert "[env-store]: environment stored in s3://" in log, log
    key, record = job.record()
    archive = key.replace("env.json", f"{record['sha256']}.tar.gz")
    assert job.objects()[archive] == record["bytes"] > 2_500_000  # the requirements' payload is in it
    # The image's PyTorch env stays as it was: what setup installed is in the job's venv only.
    assert "jobdep" not in subprocess.run([sys.executable, "-m", "pip", "list"], capture_output=True, text=True).stdout


def test_a_replacement_restores_it_instead_of_installing(job: Job, replacement: tuple[UserDataSandbox, str]) -> None:
    sandbox, log = replacement
    assert "[env-restore]: environment restored from s3://" in log, log
    assert "running in" not in log and not (sandbox.root / "opt/spot-trainer/work/setup.log").exists(), log
    assert "[trainer-package]: spot_trainer-0.2.0.dist-info already installed" in log, log
    assert imports_jobdep(sandbox) == "1.0"
    venv_python = sandbox.root / "opt/spot-trainer/venv/bin/python3"
    assert f"ExecStart={venv_python} -P -m spot_trainer agent" in sandbox.unit_file.read_text()
    phases = [json.loads(line) for line in (sandbox.root / "var/lib/spot-trainer/boot-phases.jsonl").read_text()
              .splitlines()]
    assert [(p["phase"], p["how"]) for p in phases] == [("environment", "restored")]
    assert phases[0]["bytes"] == job.record()[1]["bytes"]


def test_a_damaged_archive_makes_one_instance_install_and_say_so(
    job: Job, replacement: tuple[UserDataSandbox, str]
) -> None:
    key, record = job.record()
    job.s3.put_object(Bucket=job.bucket, Key=key.replace("env.json", f"{record['sha256']}.tar.gz"), Body=b"garbage")
    _, log = job.boot("after-damage")
    assert "is damaged (its sha256 is not the one env.json names); installing instead" in log, log
    assert "[setup-command]: running in" in log and "[env-store]: environment stored in" in log, log
    # The record now names the rebuilt archive, whole: the instances after this one restore it.
    key, repaired = job.record()
    body = job.s3.get_object(Bucket=job.bucket, Key=key.replace("env.json", f"{repaired['sha256']}.tar.gz"))["Body"]
    assert repaired["sha256"] != record["sha256"] and hashlib.sha256(body.read()).hexdigest() == repaired["sha256"]


def test_of_two_instances_storing_at_once_the_first_record_stays(
    job: Job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in job.aws.items():
        monkeypatch.setenv(name, value)
    uri = f"s3://{job.bucket}/cifar/env-cache/race/env.json"
    mine, theirs = tmp_path / "mine.json", tmp_path / "theirs.json"
    mine.write_text('{"sha256": "a"}')
    theirs.write_text('{"sha256": "b"}')
    assert write_record(mine, uri) is True
    assert write_record(theirs, uri) is False
    stored = job.s3.get_object(Bucket=job.bucket, Key="cifar/env-cache/race/env.json")["Body"].read()
    assert json.loads(stored) == {"sha256": "a"}
