"""docs/your-own-script.md followed as written in the local spot cloud: its script and job file, its
secret, `npx cdk deploy`, then the job driven only by its name: `status`, `logs`, `pause` mid-training
(the step in flight reaches S3, the group goes to zero), `resume` (training goes on from that step to
the end) and `outputs` (the final model, checked). The secret reaches the training command's
environment and nothing else: not the template, the user data, the agent's environment, the logs or
any record in S3."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest

from localcloud.cloud import Deployment, LocalCloud
from localcloud.player import Player, RunOptions
from spot_trainer.storage.remote import RemoteStore
from tests.conftest import REPO_ROOT
from tests.support.walkthrough import Walkthrough, read_walkthrough

PAGE = REPO_ROOT / "docs" / "your-own-script.md"
JOB = "mine"
STEPS = 30
PAUSE_AT = 4  # no checkpoint before the last step but the one the pause asks for (the script saves every 100)
# The script's own knobs. Before the pause, a pace that leaves `status`, `logs` and `pause` a minute after
# PAUSE_AT, however busy the machine: the pause must find the job training, not DONE. After it, quick.
PACE_UNTIL_PAUSED = {"STEPS": str(STEPS), "STEP_SECONDS": "2.5"}
PACE_AFTER_RESUME = {"STEPS": str(STEPS), "STEP_SECONDS": "0.1"}


def spot_trainer(cloud: LocalCloud, line: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    """A `spot-trainer ...` line of the page as a user runs it: the region and credentials of the environment."""
    words = shlex.split(line)
    assert words[0] == "spot-trainer", line
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPOT_"))}, **cloud.aws_env}
    return subprocess.run([sys.executable, "-m", "spot_trainer", *words[1:]], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def put_secret(cloud: LocalCloud, line: str) -> str:
    """The page's `aws ssm put-parameter ...` line run by the AWS CLI itself against the local cloud; the value."""
    words = shlex.split(line)
    assert words[:3] == ["aws", "ssm", "put-parameter"], line
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **cloud.aws_env,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # the venv's aws
    done = subprocess.run(words, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return words[words.index("--value") + 1]


@dataclass
class Followed:
    cloud: LocalCloud
    deployment: Deployment
    page: Walkthrough
    token: str
    first: Player
    second: Player
    paused_at: int  # the newest step the script had printed when `pause` was given
    said: dict[str, subprocess.CompletedProcess[str]]
    downloads: Path  # where `outputs` ran
    environments: dict[str, bytes]  # "agent", "command": /proc/<pid>/environ while training
    synth_said: str  # the CDK CLI's output of the synth

    def store(self) -> RemoteStore:
        return RemoteStore(self.cloud.client("s3"), self.deployment.bucket, self.deployment.job)


@pytest.fixture(scope="module")
def followed(local_cloud: LocalCloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Followed]:
    page = read_walkthrough(PAGE)
    checkout = tmp_path_factory.mktemp("checkout")
    page.write_files(checkout)
    (secret,) = page.commands["secret"]
    token = put_secret(local_cloud, secret)
    (deploy,) = page.commands["deploy"]
    assert deploy == f"npx cdk deploy -c job={JOB}"
    app = local_cloud.synth(str(checkout / "jobs" / f"{JOB}.toml"))  # the CLI's synth of jobs/mine.toml
    synth_said = (local_cloud.workdir / "cdk-synth.log").read_text()
    deployment = local_cloud.deploy(app)
    said: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        def options(pace: dict[str, str]) -> RunOptions:
            return RunOptions(total_steps=STEPS, timeout_seconds=240,
                              command_env={"OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"], **pace})

        first = Player(local_cloud, deployment, options(PACE_UNTIL_PAUSED))
        failures: list[BaseException] = []
        thread = threading.Thread(target=lambda: _run(first, failures), daemon=True)
        thread.start()
        deadline = time.monotonic() + 180
        while (first.current_step() or 0) < PAUSE_AT and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        environments = process_environments(first)
        for line in page.commands["watch"]:
            said[line] = spot_trainer(local_cloud, line)
        paused_at = first.current_step() or 0
        (pause,) = page.commands["pause"]
        said[pause] = spot_trainer(local_cloud, pause)
        thread.join(timeout=120)
        assert not failures and not thread.is_alive(), failures
        said["status paused"] = spot_trainer(local_cloud, f"spot-trainer status --job {JOB}")
        said["pause again"] = spot_trainer(local_cloud, pause)
        (resume,) = page.commands["resume"]
        said[resume] = spot_trainer(local_cloud, resume)
        second = Player(local_cloud, deployment, options(PACE_AFTER_RESUME)).run()
        said["resume again"] = spot_trainer(local_cloud, resume)
        downloads = tmp_path_factory.mktemp("downloads")
        (download,) = page.commands["download"]
        said[download] = spot_trainer(local_cloud, download, cwd=downloads)
        said["checkpoint"] = spot_trainer(local_cloud, f"{download} --checkpoint --to ckpt", cwd=downloads)
        (picture,) = page.commands["picture"]
        said[picture] = spot_trainer(local_cloud, picture, cwd=downloads)
        yield Followed(local_cloud, deployment, page, token, first, second, paused_at, said, downloads, environments,
                       synth_said)
    finally:
        local_cloud.destroy(deployment)


def process_environments(player: Player) -> dict[str, bytes]:
    """The agent's and the training command's environments, read from /proc while they run."""
    (instance,) = player.alive()
    agent = instance.agent_pid()
    found = {"agent": Path(f"/proc/{agent}/environ").read_bytes()} if agent else {}
    for pid in instance.processes():
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:2] == [b"train.py"]:
            found["command"] = Path(f"/proc/{pid}/environ").read_bytes()
    return found


def _run(player: Player, failures: list[BaseException]) -> None:
    try:
        player.run()
    except BaseException as error:  # noqa: BLE001 - handed to the fixture, which fails with it
        failures.append(error)


def test_status_by_name_shows_the_job_its_group_and_dashboard(followed: Followed) -> None:
    result = followed.said[f"spot-trainer status --job {JOB}"]
    assert result.returncode == 0, result.stderr
    assert "TRAINING" in result.stdout and "group: wants 1 of at most 1 instance(s)" in result.stdout
    assert f"#dashboards:name=spot-trainer-{JOB}" in result.stdout


def test_pause_saves_the_step_in_flight_and_leaves_the_group_at_zero(followed: Followed) -> None:
    assert followed.said[f"spot-trainer pause --job {JOB}"].returncode == 0
    (instance,) = followed.first.logs.values()
    saved = followed.first.latest_history[-1]
    assert saved == instance.max_step and saved >= followed.paused_at >= PAUSE_AT  # no step it reached is lost
    interruption = followed.store().events("interruption")[0]
    assert interruption["reason"] == "scale-in (lifecycle Terminated)" and interruption["step"] == saved
    status = followed.said["status paused"]
    assert status.returncode == 0 and "paused: the group wants 0 instances" in status.stdout, status


def test_resume_goes_on_from_the_paused_step_to_the_end(followed: Followed) -> None:
    assert followed.said[f"spot-trainer resume --job {JOB}"].returncode == 0
    (instance,) = followed.second.logs.values()
    assert instance.resumed_step == followed.first.latest_history[-1]
    status = followed.store().get_json("status.json")
    assert status is not None and status["state"] == "DONE" and status["step"] == STEPS


def test_a_second_pause_or_resume_is_one_line_and_changes_nothing(followed: Followed) -> None:
    again = followed.said["pause again"]
    assert again.returncode == 1 and again.stderr.strip().splitlines() == [
        f"spot-trainer pause: job '{JOB}' is already paused (its group wants 0 instances); "
        f"`spot-trainer resume --job {JOB}` starts it again"]
    done = followed.said["resume again"]
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"spot-trainer resume: job '{JOB}' is DONE: there is nothing to resume"]
    kinds = [event["kind"] for event in followed.store().events()]
    assert kinds.count("paused") == 1 and kinds.count("resumed") == 1


def test_logs_by_name_hold_the_instance_s_lines_in_time_order(followed: Followed) -> None:
    result = followed.said[f"spot-trainer logs --job {JOB}"]
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    (instance,) = followed.first.instances
    assert lines and all(line.split(" ")[1] == instance for line in lines)
    assert lines == sorted(lines, key=lambda line: line.split(" ")[0])
    assert any("HF_TOKEN given: True" in line for line in lines)


def test_outputs_downloads_the_final_model_and_the_newest_checkpoint(followed: Followed) -> None:
    result = followed.said[f"spot-trainer outputs --job {JOB}"]
    assert result.returncode == 0, result.stderr
    s3 = followed.cloud.client("s3")
    stored = s3.get_object(Bucket=followed.deployment.bucket, Key=f"{JOB}/final/model_final.pt")["Body"].read()
    assert (followed.downloads / f"{JOB}-outputs" / "model_final.pt").read_bytes() == stored
    checkpoint = followed.said["checkpoint"]
    assert checkpoint.returncode == 0 and checkpoint.stdout.startswith(f"checkpoint step {STEPS} of job"), checkpoint
    assert (followed.downloads / "ckpt" / f"step-{STEPS}").is_file()


def test_the_secret_reaches_the_command_and_nothing_else(followed: Followed) -> None:
    token = followed.token.encode()
    assert b"HF_TOKEN=" + token in followed.environments["command"].split(b"\0")
    assert token not in followed.environments["agent"]
    for template in followed.deployment.app_dir.glob("*.template.json"):
        assert token not in template.read_bytes() and b"/mine/hf-token" in template.read_bytes()
    for path in followed.cloud.workdir.rglob("*"):  # user data, console output, journals, every instance's files
        if path.is_file() and not path.name.startswith("moto"):
            assert token not in path.read_bytes(), path
    s3 = followed.cloud.client("s3")
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=followed.deployment.bucket)
            for o in page.get("Contents", [])]
    assert f"{JOB}/status.json" in keys
    for key in keys:
        assert token not in s3.get_object(Bucket=followed.deployment.bucket, Key=key)["Body"].read(), key
    logs = followed.cloud.client("logs")
    pages = logs.get_paginator("filter_log_events").paginate(logGroupName=f"/spot-trainer/{JOB}")
    lines = [event["message"] for page in pages for event in page["events"]]
    assert lines and not [line for line in lines if followed.token in line]


def test_the_synth_ends_with_the_summary_the_page_shows(followed: Followed) -> None:
    page = PAGE.read_text()
    summary = [line for line in page.splitlines() if line.startswith("spot-trainer: ")]
    assert len(summary) == 4 and all(line in followed.synth_said.splitlines() for line in summary), followed.synth_said


def test_the_picture_shows_each_instance_the_pause_and_the_last_step(followed: Followed) -> None:
    result = followed.said[f"spot-trainer status --job {JOB} --plot {JOB}.svg"]
    assert result.returncode == 0, result.stderr
    picture = ElementTree.parse(followed.downloads / f"{JOB}.svg").getroot()
    ids = [element.get("id", "") for element in picture.iter()]
    instances = sorted([*followed.first.instances, *followed.second.instances])
    assert sorted(i.removeprefix("instance-") for i in ids if i.startswith("instance-")) == instances
    assert len([i for i in ids if i.startswith("interruption-")]) == 1  # the pause's save, as the agent recorded it
    assert any(i.startswith("paused-") for i in ids) and any(i.startswith("resumed-") for i in ids)
    assert f"step {STEPS}" in "".join("".join(e.itertext()) for e in picture.iter() if e.get("id") == "last-step")
