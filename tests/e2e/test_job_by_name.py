"""The example job, with a secret, in the local spot cloud driven only by its name, as a user would:
`status`, `logs`, `pause` mid-training (the step in flight reaches S3, the group goes to zero), `resume`
(training goes on from that step to the end) and `outputs --checkpoint` (the files S3 holds, checked).
The secret reaches the training command's environment and nothing else: not the template, the user data,
the agent's environment, the logs or any record in S3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcloud.cloud import Deployment, LocalCloud
from localcloud.player import Player, RunOptions
from spot_trainer.storage.remote import RemoteStore
from tests.conftest import REPO_ROOT
from tests.e2e.conftest import TRAIN_ARGS

JOB = "named"  # jobs/example.toml with a secret, as named.toml
TOKEN = "hf_e2e-s3cr3t-31d7"
PARAMETER = "/e2e/hf-token"
STEPS = 40
PAUSE_AT = 12  # past the first checkpoint (every 8): the pause saves a step no periodic checkpoint has
ARGUMENTS = TRAIN_ARGS.replace("--steps 104", f"--steps {STEPS}")


def spot_trainer(cloud: LocalCloud, *args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    """The installed command as a user runs it: the region and credentials of the environment only."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPOT_"))}, **cloud.aws_env}
    return subprocess.run([sys.executable, "-m", "spot_trainer", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@dataclass
class PausedJob:
    cloud: LocalCloud
    deployment: Deployment
    first: Player
    second: Player
    paused_at: int  # the newest step the trainer had logged when `pause` was given
    outputs: dict[str, subprocess.CompletedProcess[str]]
    downloads: Path  # where `outputs` ran
    environments: dict[str, bytes]  # "agent", "command": /proc/<pid>/environ while training

    def store(self) -> RemoteStore:
        return RemoteStore(self.cloud.client("s3"), self.deployment.bucket, self.deployment.job)


@pytest.fixture(scope="module")
def named_app(local_cloud: LocalCloud, tmp_path_factory: pytest.TempPathFactory) -> Path:
    job = tmp_path_factory.mktemp("jobs") / f"{JOB}.toml"
    example = (REPO_ROOT / "jobs" / "example.toml").read_text()
    job.write_text(example.replace("grace_seconds = 60", f'grace_seconds = 60\nsecrets = ["HF_TOKEN=ssm:{PARAMETER}"]'))
    return local_cloud.synth(str(job))


@pytest.fixture(scope="module")
def paused(local_cloud: LocalCloud, named_app: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[PausedJob]:
    local_cloud.client("ssm").put_parameter(Name=PARAMETER, Value=TOKEN, Type="SecureString", Overwrite=True)
    deployment = local_cloud.deploy(named_app, {"TrainArguments": ARGUMENTS})
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        options = RunOptions(total_steps=STEPS, timeout_seconds=240,
                             command_env={"OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"]})
        first = Player(local_cloud, deployment, options)
        failures: list[BaseException] = []
        thread = threading.Thread(target=lambda: _run(first, failures), daemon=True)
        thread.start()
        deadline = time.monotonic() + 180
        while (first.current_step() or 0) < PAUSE_AT and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        paused_at = first.current_step() or 0
        environments = process_environments(first)
        outputs["status"] = spot_trainer(local_cloud, "status", "--job", JOB)
        outputs["pause"] = spot_trainer(local_cloud, "pause", "--job", JOB)
        thread.join(timeout=120)
        assert not failures and not thread.is_alive(), failures
        outputs["status paused"] = spot_trainer(local_cloud, "status", "--job", JOB)
        outputs["pause again"] = spot_trainer(local_cloud, "pause", "--job", JOB)
        outputs["logs"] = spot_trainer(local_cloud, "logs", "--job", JOB)
        outputs["resume"] = spot_trainer(local_cloud, "resume", "--job", JOB)
        second = Player(local_cloud, deployment, options).run()
        outputs["resume again"] = spot_trainer(local_cloud, "resume", "--job", JOB)
        folder = tmp_path_factory.mktemp("downloads")
        outputs["outputs"] = spot_trainer(local_cloud, "outputs", "--job", JOB, "--checkpoint", cwd=folder)
        yield PausedJob(local_cloud, deployment, first, second, paused_at, outputs, folder, environments)
    finally:
        local_cloud.destroy(deployment)


def process_environments(player: Player) -> dict[str, bytes]:
    """The agent's and the training command's environments, read from /proc while they run."""
    (instance,) = player.alive()
    agent = instance.agent_pid()
    found = {"agent": Path(f"/proc/{agent}/environ").read_bytes()} if agent else {}
    for pid in instance.processes():
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"spot_trainer" in command and b"train" in command:
            found["command"] = Path(f"/proc/{pid}/environ").read_bytes()
    return found


def _run(player: Player, failures: list[BaseException]) -> None:
    try:
        player.run()
    except BaseException as error:  # noqa: BLE001 - handed to the fixture, which fails with it
        failures.append(error)


def test_status_by_name_shows_the_job_its_group_and_dashboard(paused: PausedJob) -> None:
    result = paused.outputs["status"]
    assert result.returncode == 0, result.stderr
    assert "TRAINING" in result.stdout and "group: wants 1 of at most 1 instance(s)" in result.stdout
    assert f"#dashboards:name=spot-trainer-{JOB}" in result.stdout


def test_pause_saves_the_step_in_flight_and_leaves_the_group_at_zero(paused: PausedJob) -> None:
    assert paused.outputs["pause"].returncode == 0, paused.outputs["pause"].stderr
    (instance,) = paused.first.logs.values()
    saved = instance.emergency_step
    assert saved is not None and saved >= paused.paused_at >= PAUSE_AT and saved % 8 != 0
    assert paused.first.latest_history[-1] == saved == instance.max_step  # no step it reached is lost
    interruption = paused.store().events("interruption")[0]
    assert interruption["reason"] == "scale-in (lifecycle Terminated)" and interruption["step"] == saved
    status = paused.outputs["status paused"]
    assert status.returncode == 0 and "paused: the group wants 0 instances" in status.stdout, status


def test_resume_goes_on_from_the_paused_step_to_the_end(paused: PausedJob) -> None:
    assert paused.outputs["resume"].returncode == 0, paused.outputs["resume"].stderr
    (instance,) = paused.second.logs.values()
    (first,) = paused.first.logs.values()
    assert instance.resumed_step == first.emergency_step
    status = paused.store().get_json("status.json")
    assert status is not None and status["state"] == "DONE" and status["step"] == STEPS


def test_a_second_pause_or_resume_is_one_line_and_changes_nothing(paused: PausedJob) -> None:
    again = paused.outputs["pause again"]
    assert again.returncode == 1 and again.stderr.strip().splitlines() == [
        f"spot-trainer pause: job '{JOB}' is already paused (its group wants 0 instances); "
        f"`spot-trainer resume --job {JOB}` starts it again"]
    done = paused.outputs["resume again"]
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"spot-trainer resume: job '{JOB}' is DONE: there is nothing to resume"]
    kinds = [event["kind"] for event in paused.store().events()]
    assert kinds.count("paused") == 1 and kinds.count("resumed") == 1


def test_logs_by_name_hold_every_instance_in_time_order(paused: PausedJob) -> None:
    result = paused.outputs["logs"]
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    (instance,) = paused.first.instances
    assert lines and all(line.split(" ")[1] == instance for line in lines)
    assert lines == sorted(lines, key=lambda line: line.split(" ")[0])
    assert any("scale-in (lifecycle Terminated)" in line for line in lines)


def test_outputs_downloads_the_newest_checkpoint_checked(paused: PausedJob) -> None:
    result = paused.outputs["outputs"]
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"checkpoint step {STEPS} of job '{JOB}'"), result.stdout
    manifest = paused.store().get_json(f"checkpoints/step-{STEPS:08d}/MANIFEST.json")
    assert manifest is not None
    downloaded = paused.downloads / result.stdout.split(" in ")[1].split(",")[0]
    assert downloaded == paused.downloads / f"{JOB}-checkpoint" / f"step-{STEPS:08d}"
    sizes = {name: entry["size"] for name, entry in manifest["files"].items()}
    found = {p.relative_to(downloaded).as_posix(): p.stat().st_size for p in downloaded.rglob("*") if p.is_file()}
    assert found == sizes, json.dumps(manifest)


def test_the_secret_reaches_the_command_and_nothing_else(paused: PausedJob) -> None:
    assert f"HF_TOKEN={TOKEN}".encode() in paused.environments["command"].split(b"\0")
    assert TOKEN.encode() not in paused.environments["agent"]
    token = TOKEN.encode()
    for template in paused.deployment.app_dir.glob("*.template.json"):
        assert token not in template.read_bytes() and PARAMETER.encode() in template.read_bytes()
    for path in paused.cloud.workdir.rglob("*"):  # user data, console output, journals, every instance's files
        if path.is_file() and not path.name.startswith("moto"):
            assert token not in path.read_bytes(), path
    s3 = paused.cloud.client("s3")
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=paused.deployment.bucket)
            for o in page.get("Contents", [])]
    assert f"{JOB}/status.json" in keys
    for key in keys:
        assert token not in s3.get_object(Bucket=paused.deployment.bucket, Key=key)["Body"].read(), key
    pages = paused.cloud.client("logs").get_paginator("filter_log_events").paginate(logGroupName=f"/spot-trainer/{JOB}")
    lines = [event["message"] for page in pages for event in page["events"]]
    assert lines and not [line for line in lines if TOKEN in line]
