"""docs/your-own-script.md followed as written, offline: its script and job file, `python -m localcloud up`
with the page's secret, the printed exports, then the job driven only by its name through the installed
`spot-trainer`: `status`, `logs`, an interruption on demand, `pause` mid-training (the step in flight
reaches S3, the group goes to zero), `resume` (training goes on from that step to the end, `logs --follow`
for a few seconds meanwhile), `outputs` and `outputs --checkpoint` (checked against S3) and the picture; then
`down`, which ends the up as Ctrl-C does. The secret reaches the training command's environment and
nothing else: not the template, the user data, the agent's environment, the logs or any record in S3."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import boto3
import pytest

from spot_trainer.storage.steps.remote import RemoteStore
from tests.conftest import REPO_ROOT
from tests.support.walkthrough import Walkthrough, read_walkthrough

PAGE = REPO_ROOT / "docs" / "your-own-script.md"
JOB = "mine"
STEPS = 30
PAUSE_AT = 4  # no checkpoint before the last step but those the notice and the pause ask for (it saves every 100)
# The script's own knobs: 2 s a step leaves the commands between the replacement's first step and the pause
# half a minute, however busy the machine; the pause must find the job training, not DONE.
PACE = {"STEPS": str(STEPS), "STEP_SECONDS": "2"}
SPOT_TRAINER = Path(sys.executable).parent / "spot-trainer"  # the installed command, as `make` puts it in .venv
WAIT = 240.0  # the bound on any one wait: a deploy, a boot, a job's end


@dataclass
class Up:
    """`python -m localcloud up` as a user runs it: its exports, its stderr, and the commands beside it."""

    process: subprocess.Popen[str]
    state: Path
    stderr: Path
    exports: dict[str, str]

    def said(self) -> str:
        return self.stderr.read_text()

    def beside(self, line: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
        """A `.venv/bin/python -m localcloud ...` line of the page, or a `spot-trainer ...` one, with the exports."""
        words = shlex.split(line)
        if words[0] == "spot-trainer":
            words[0] = str(SPOT_TRAINER)
        else:
            assert words[:3] == [".venv/bin/python", "-m", "localcloud"], line
            words = [sys.executable, *words[1:], "--state", str(self.state)]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPOT_"))}, **self.exports}
        return subprocess.run(words, env=env, cwd=cwd, capture_output=True, text=True, timeout=WAIT)

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.exports["AWS_ENDPOINT_URL"], region_name=self.exports[
            "AWS_REGION"], aws_access_key_id=self.exports["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.exports["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=self.exports["AWS_SESSION_TOKEN"])


@dataclass
class Followed:
    up: Up
    page: Walkthrough
    token: str
    bucket: str
    said: dict[str, subprocess.CompletedProcess[str]]
    first: str  # the instance the interruption took
    interrupted_at: int  # the step S3 held once that instance was gone
    paused_at: int  # the newest step S3 held when `pause` was given
    downloads: Path  # where `outputs` ran
    environments: dict[str, bytes]  # "agent", "command": /proc/<pid>/environ while training
    synth_said: str  # the CDK CLI's output of the synth
    files: dict[Path, bytes]  # every file of the run (but moto's) while it was up
    followed_lines: str  # what `logs --follow` printed in its few seconds
    objects: dict[str, bytes]  # the bucket's every object once the job was DONE, before `down`
    events: list[dict[str, Any]]  # the job's events then
    up_ended: int | None  # the up's exit status after `down`
    endpoint_after_down: bool  # whether the local AWS still answered

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["kind"] == kind]


def wait_for(what: str, condition: Callable[[], Any], up: Up, timeout: float = WAIT) -> Any:
    """Poll until `condition()` is truthy, failing with the up's last lines after `timeout` or when it ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (found := condition()) is not None and found is not False:
            return found
        assert up.process.poll() is None, f"up ended ({up.process.returncode}) waiting for {what}:\n{up.said()[-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout:.0f}s; up said:\n{up.said()[-3000:]}")


def start_up(line: str, job_file: Path, state: Path, stderr: Path) -> Up:
    """The page's `up` line, the job file at its path in the checkout, only the interruption asked for."""
    words = shlex.split(line)
    assert words[:4] == [".venv/bin/python", "-m", "localcloud", "up"] and words[4:6] == ["--job", JOB], line
    words[5] = str(job_file)
    env_flags = [f"--env={name}={value}" for name, value in
                 {**PACE, "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"]}.items()]
    command = [sys.executable, *words[1:], "--interruptions", "0", "--state", str(state), *env_flags]
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPOT_"))}
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=environment, stdout=subprocess.PIPE,
                               stderr=stderr.open("w"), text=True, start_new_session=True)
    up = Up(process, state, stderr, {})
    try:
        read_exports(up)
    except BaseException:
        stop(up)
        raise
    return up


def read_exports(up: Up) -> None:
    process = up.process
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True)
    reader.start()  # stdout holds the exports only, and ends with the up
    deadline = time.monotonic() + WAIT
    while len(lines) < 6 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    for line in lines[:6]:
        name, _, value = shlex.split(line.removeprefix("export "))[0].partition("=")
        up.exports[name] = value
    assert len(up.exports) == 6, f"no exports from up:\n{up.said()}"


def stop(up: Up) -> None:
    """Ctrl-C, as a user ends it, if it still runs; a kill only for a hung one."""
    if up.process.poll() is None:
        up.process.send_signal(signal.SIGINT)
        try:
            up.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            os.killpg(up.process.pid, signal.SIGKILL)
            up.process.wait(timeout=30)
            subprocess.run([sys.executable, "-m", "localcloud", "down", "--job", JOB, "--state", str(up.state)],
                           cwd=REPO_ROOT, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def followed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Followed]:
    page = read_walkthrough(PAGE)
    checkout = tmp_path_factory.mktemp("checkout")
    page.write_files(checkout)
    (line,) = page.commands["offline"]
    token = shlex.split(line)[-1].partition("=")[2]
    state = tmp_path_factory.mktemp("state")
    up = start_up(line, checkout / "jobs" / f"{JOB}.toml", state, state.parent / "up.stderr")
    said: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        (env_line,) = page.commands["offline-env"]
        said["env"] = up.beside(env_line.removeprefix('eval "$(').removesuffix(')"'))
        s3 = up.client("s3")
        (bucket,) = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].startswith("spottrainer-mine")]
        store = RemoteStore(s3, bucket, JOB)

        def status() -> dict[str, Any]:
            return store.get_json("status.json") or {}

        def saved() -> int:
            return int((store.get_json("latest.json") or {}).get("step") or 0)

        wait_for(f"step {PAUSE_AT}", lambda: (status().get("step") or 0) >= PAUSE_AT, up)
        synth_said = (state / JOB / "cloud" / "cdk-synth.log").read_text()
        environments = process_environments(state)
        for watch in page.commands["watch"]:
            said[watch] = up.beside(watch)
        first = status()["instance"]
        (interrupt,) = page.commands["interrupt"]
        said[interrupt] = up.beside(interrupt)
        assert said[interrupt].returncode == 0, said[interrupt]
        wait_for("a replacement training", lambda: (now := status()).get("instance") not in (None, first)
                 and now.get("state") == "TRAINING" and (now.get("step") or 0) > saved(), up)
        interrupted_at = saved()
        files = {path: path.read_bytes() for path in (state / JOB).rglob("*")
                 if path.is_file() and not path.name.startswith("moto")}
        paused_at = status()["step"]
        (pause,) = page.commands["pause"]
        said[pause] = up.beside(pause)
        wait_for("the group at 0", lambda: up.said().count("group is at 0") == 1, up)
        said["status paused"] = up.beside(f"spot-trainer status --job {JOB}")
        groups = up.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
        said["group paused"] = subprocess.CompletedProcess([], 0, json.dumps(groups, default=str))
        said["pause again"] = up.beside(pause)
        (resume,) = page.commands["resume"]
        said[resume] = up.beside(resume)
        wait_for("training again", lambda: (status().get("step") or 0) > paused_at, up)
        followed_lines = follow_logs(up, seconds=5)  # the resumed instance's steps as they come
        wait_for("DONE", lambda: status().get("state") == "DONE" and "is DONE" in up.said(), up)
        said["resume again"] = up.beside(resume)
        downloads = tmp_path_factory.mktemp("downloads")
        (download,) = page.commands["download"]
        said[download] = up.beside(download, cwd=downloads)
        said["checkpoint"] = up.beside(f"{download} --checkpoint --to ckpt", cwd=downloads)
        (picture,) = page.commands["picture"]
        said[picture] = up.beside(picture, cwd=downloads)
        said["stacks"] = subprocess.CompletedProcess([], 0, " ".join(
            s["StackName"] for s in up.client("cloudformation").describe_stacks()["Stacks"]))
        objects = {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
                   for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket) for o in page["Contents"]}
        events = store.events()
        said["down"] = up.beside(".venv/bin/python -m localcloud down")
        ended = up.process.wait(timeout=WAIT) if said["down"].returncode == 0 else None
        yield Followed(up, page, token, bucket, said, first, interrupted_at, paused_at, downloads, environments,
                       synth_said, files, followed_lines, objects, events, ended,
                       answers(up.exports["AWS_ENDPOINT_URL"]))
    finally:
        stop(up)


def follow_logs(up: Up, seconds: float) -> str:
    """`spot-trainer logs --follow` for a few seconds, ended by Ctrl-C as a user ends it."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPOT_"))}, **up.exports}
    process = subprocess.Popen([str(SPOT_TRAINER), "logs", "--job", JOB, "--follow"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(seconds)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=WAIT)  # a loaded machine may take a while to wind the command down
    return out


def answers(endpoint: str) -> bool:
    try:
        urllib.request.urlopen(endpoint, timeout=2).close()
        return True
    except OSError:
        return False


def process_environments(state: Path) -> dict[str, bytes]:
    """The agent's and the training command's environments, read from /proc while they run: the agent is
    the unit's main process (its pid file), the command the process running train.py in the run's folder."""
    found: dict[str, bytes] = {}
    for pid_file in (state / JOB / "cloud" / "instances").glob("i-*/run/systemctl/*.pid"):
        found["agent"] = Path(f"/proc/{pid_file.read_text().strip()}/environ").read_bytes()
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            if entry.name.isdigit() and command[1:2] == [b"train.py"] and str(state) in os.readlink(entry / "cwd"):
                found["command"] = (entry / "environ").read_bytes()
        except OSError:
            continue
    return found


def test_up_prints_the_exports_and_env_prints_them_again(followed: Followed) -> None:
    exports = followed.up.exports
    assert exports["AWS_ENDPOINT_URL"].startswith("http://localhost:") and exports["AWS_REGION"] == "us-east-1"
    assert exports["AWS_ACCESS_KEY_ID"] and exports["AWS_SECRET_ACCESS_KEY"]
    env = followed.said["env"]
    assert env.returncode == 0 and env.stdout == "".join(f"export {k}={v}\n" for k, v in exports.items()), env


def test_status_by_name_shows_the_job_its_group_and_dashboard(followed: Followed) -> None:
    result = followed.said[f"spot-trainer status --job {JOB}"]
    assert result.returncode == 0, result.stderr
    assert "TRAINING" in result.stdout and "group: wants 1 of at most 1 instance(s)" in result.stdout
    assert f"#dashboards:name=spot-trainer-{JOB}" in result.stdout


def test_logs_by_name_hold_the_instance_s_lines_in_time_order(followed: Followed) -> None:
    result = followed.said[f"spot-trainer logs --job {JOB}"]
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines and all(line.split(" ")[1] == followed.first for line in lines)
    assert lines == sorted(lines, key=lambda line: line.split(" ")[0])
    assert any("HF_TOKEN given: True" in line for line in lines)


def test_logs_follow_prints_new_steps_and_ends_quietly_on_ctrl_c(followed: Followed) -> None:
    steps = [json.loads(line.split("  ", 1)[1])["step"] for line in followed.followed_lines.splitlines()
             if '"event": "step"' in line]
    assert steps and "Traceback" not in followed.followed_lines, followed.followed_lines


def test_an_interruption_on_demand_takes_the_instance_and_a_replacement_goes_on(followed: Followed) -> None:
    result = followed.said[f".venv/bin/python -m localcloud interrupt --job {JOB}"]
    assert result.returncode == 0 and result.stdout.strip() == (
        f"instance {followed.first}: spot interruption notice, 8s to go"), result
    notice = [e for e in followed.events_of("interruption") if e.get("instance") == followed.first]
    assert notice and notice[0]["step"] == followed.interrupted_at  # the step in flight reached S3
    resumed = [e for e in followed.events_of("resume") if e.get("instance") != followed.first]
    assert resumed and resumed[0]["step"] == followed.interrupted_at


def test_pause_saves_the_step_in_flight_and_leaves_the_group_at_zero(followed: Followed) -> None:
    assert followed.said[f"spot-trainer pause --job {JOB}"].returncode == 0
    paused = [e for e in followed.events_of("interruption") if e["reason"] == "scale-in (lifecycle Terminated)"]
    assert len(paused) == 1 and paused[0]["step"] >= followed.paused_at  # no step it reached is lost
    status = followed.said["status paused"]
    assert status.returncode == 0 and "PAUSED" in status.stdout, status
    assert "paused: the group wants 0 instances" in status.stdout, status
    (group,) = json.loads(followed.said["group paused"].stdout)
    assert group["DesiredCapacity"] == 0 and group["Instances"] == []


def test_resume_goes_on_from_the_paused_step_to_the_end(followed: Followed) -> None:
    assert followed.said[f"spot-trainer resume --job {JOB}"].returncode == 0
    paused = [e for e in followed.events_of("interruption") if e["reason"] == "scale-in (lifecycle Terminated)"]
    assert followed.events_of("resume")[-1]["step"] == paused[0]["step"]
    status = json.loads(followed.objects[f"{JOB}/status.json"])
    assert status["state"] == "DONE" and status["step"] == STEPS


def test_a_second_pause_or_resume_is_one_line_and_changes_nothing(followed: Followed) -> None:
    again = followed.said["pause again"]
    assert again.returncode == 1 and again.stderr.strip().splitlines() == [
        f"spot-trainer pause: job '{JOB}' is already paused (its group wants 0 instances); "
        f"`spot-trainer resume --job {JOB}` starts it again"]
    done = followed.said["resume again"]
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"spot-trainer resume: job '{JOB}' is DONE: there is nothing to resume"]
    kinds = [event["kind"] for event in followed.events]
    assert kinds.count("paused") == 1 and kinds.count("resumed") == 1


def test_outputs_downloads_the_final_model_and_the_newest_checkpoint(followed: Followed) -> None:
    result = followed.said[f"spot-trainer outputs --job {JOB}"]
    assert result.returncode == 0, result.stderr
    stored = followed.objects[f"{JOB}/final/model_final.pt"]
    assert (followed.downloads / f"{JOB}-outputs" / "model_final.pt").read_bytes() == stored
    checkpoint = followed.said["checkpoint"]
    assert checkpoint.returncode == 0 and checkpoint.stdout.startswith(f"checkpoint step {STEPS} of job"), checkpoint
    stored = [body for key, body in followed.objects.items()
              if key.startswith(f"{JOB}/checkpoints/step-{STEPS:08d}/") and not key.endswith("MANIFEST.json")]
    assert [(followed.downloads / "ckpt" / f"step-{STEPS}").read_bytes()] == stored, sorted(followed.objects)


def test_the_secret_reaches_the_command_and_nothing_else(followed: Followed) -> None:
    token = followed.token.encode()
    assert followed.token == "hf_your_token"
    assert b"HF_TOKEN=" + token in followed.environments["command"].split(b"\0")
    assert token not in followed.environments["agent"]
    for path, content in followed.files.items():  # templates, user data, console output, journals, instances' files
        assert token not in content, path
    assert any(p.name.endswith(".template.json") and b"/mine/hf-token" in c for p, c in followed.files.items())


def test_the_secret_is_in_no_record_and_no_log_line(followed: Followed) -> None:
    assert f"{JOB}/status.json" in followed.objects
    for key, body in followed.objects.items():
        assert followed.token.encode() not in body, key
    assert "HF_TOKEN given: True" in followed.said[f"spot-trainer logs --job {JOB}"].stdout
    assert followed.token not in followed.said[f"spot-trainer logs --job {JOB}"].stdout


def test_the_synth_ends_with_the_summary_the_page_shows(followed: Followed) -> None:
    page = PAGE.read_text()
    summary = [line for line in page.splitlines() if line.startswith("spot-trainer: ")]
    assert len(summary) == 4 and all(line in followed.synth_said.splitlines() for line in summary), followed.synth_said


def test_the_picture_shows_each_instance_the_interruption_the_pause_and_the_last_step(followed: Followed) -> None:
    result = followed.said[f"spot-trainer status --job {JOB} --plot {JOB}.svg"]
    assert result.returncode == 0, result.stderr
    picture = ElementTree.parse(followed.downloads / f"{JOB}.svg").getroot()
    ids = [element.get("id", "") for element in picture.iter()]
    assert len([i for i in ids if i.startswith("instance-")]) == 3  # the first, its replacement, the resumed one
    assert followed.first in " ".join(ids)
    assert [i for i in ids if i.startswith("interruption-")] == [f"interruption-{followed.first}"]  # the pause: its own
    assert any(i.startswith("paused-") for i in ids) and any(i.startswith("resumed-") for i in ids)
    assert f"step {STEPS}" in "".join("".join(e.itertext()) for e in picture.iter() if e.get("id") == "last-step")


def test_down_ends_the_up_as_ctrl_c_does_and_removes_what_it_made(followed: Followed) -> None:
    assert f"SpotTrainer-{JOB}" in followed.said["stacks"].stdout.split()
    down = followed.said["down"]
    assert down.returncode == 0, down
    assert followed.up_ended == 0, followed.up.said()[-2000:]
    said = followed.up.said()
    assert f"destroyed SpotTrainer-{JOB}" in said and "the local AWS is stopped" in said
    assert not followed.endpoint_after_down and not (followed.up.state / JOB).exists()
