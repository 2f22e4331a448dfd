"""`python -m localcloud up --job regions`: a job of three regions brought up as a user does, seen through the
exports it prints with `spot-trainer status` (the job training in home, each region's group and score), its
instance reaching AWS through its region's proxy, then `python -m localcloud down`: every stack destroyed and
every server (moto, each region's proxy) and instance process stopped, the run's folder removed."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from localcloud.session import Session
from localcloud.up import stop_leftovers
from tests.conftest import REPO_ROOT

JOB = "regions"
REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
WAIT = 240.0  # the bound on any one wait: a deploy of three stacks, a boot, the first steps
SPOT_TRAINER = Path(sys.executable).parent / "spot-trainer"


@dataclass
class Seen:
    said: str  # up's stderr, once it ended
    exports: dict[str, str]
    status: subprocess.CompletedProcess[str]  # `spot-trainer status --job regions` while it trained
    instance_endpoint: str  # AWS_ENDPOINT_URL in the training instance's agent's environment
    endpoint_answered: dict[str, bool]  # moto's and the instance's endpoint: whether each took a connection, up
    down: subprocess.CompletedProcess[str]
    up_ended: int | None
    left_running: list[int]  # processes of the run still alive after `down`
    endpoint_answers_after: dict[str, bool]
    folder_left: bool


def user_env(exports: dict[str, str] | None = None) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SPOT_"))}, **(exports or {})}


def read_exports(process: subprocess.Popen[str], stderr: Path) -> dict[str, str]:
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True).start()
    deadline = time.monotonic() + WAIT
    while len(lines) < 6 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    exports = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in lines[:6])
    assert len(exports) == 6, f"no exports from up:\n{stderr.read_text()}"
    return exports


def wait_for(what: str, condition: Callable[[], Any], process: subprocess.Popen[str], stderr: Path) -> Any:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if found := condition():
            return found
        assert process.poll() is None, f"up ended waiting for {what}:\n{stderr.read_text()[-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {WAIT:.0f}s; up said:\n{stderr.read_text()[-3000:]}")


def agent_endpoint(folder: Path) -> str | None:
    """AWS_ENDPOINT_URL of a running agent of the run (the unit's main process, by its pid file)."""
    for pid_file in folder.glob("cloud/instances/i-*/run/systemctl/*.pid"):
        try:
            environ = Path(f"/proc/{pid_file.read_text().strip()}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        found = [entry.decode().partition("=")[2] for entry in environ if entry.startswith(b"AWS_ENDPOINT_URL=")]
        if found:
            return found[0]
    return None


def takes_connections(endpoint: str) -> bool:
    address = urlparse(endpoint)
    try:
        socket.create_connection(("127.0.0.1", int(address.port or 80)), timeout=2).close()
        return True
    except OSError:
        return False


def processes_of(folder: Path) -> list[int]:
    """Live processes whose environment or command line names the run's folder."""
    marker = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if b" Z " not in (entry / "stat").read_bytes() and (
                        marker in (entry / "environ").read_bytes() or marker in (entry / "cmdline").read_bytes()):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seen]:
    state = tmp_path_factory.mktemp("state")
    stderr = state.parent / "up-regions.stderr"
    command = [sys.executable, "-m", "localcloud", "up", "--job", JOB, "--interruptions", "0", "--state", str(state),
               f"--env=OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"]
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=user_env(), stdout=subprocess.PIPE,
                               stderr=stderr.open("w"), text=True, start_new_session=True)
    try:
        exports = read_exports(process, stderr)

        def status() -> subprocess.CompletedProcess[str] | None:
            shown = subprocess.run([str(SPOT_TRAINER), "status", "--job", JOB], env=user_env(exports),
                                   capture_output=True, text=True, timeout=WAIT)
            return shown if "state          TRAINING" in shown.stdout and "regions        active" in shown.stdout \
                else None

        shown = wait_for("the job training, with its regions", status, process, stderr)
        endpoint = wait_for("a running agent", lambda: agent_endpoint(state / JOB), process, stderr)
        endpoints = {"moto": exports["AWS_ENDPOINT_URL"], "instance": endpoint}
        answered = {name: takes_connections(url) for name, url in endpoints.items()}
        down = subprocess.run([sys.executable, "-m", "localcloud", "down", "--job", JOB, "--state", str(state)],
                              cwd=REPO_ROOT, env=user_env(), capture_output=True, text=True, timeout=WAIT)
        ended = process.wait(timeout=WAIT) if down.returncode == 0 else None
        yield Seen(stderr.read_text(), exports, shown, endpoint, answered, down, ended, processes_of(state),
                   {name: takes_connections(url) for name, url in endpoints.items()}, (state / JOB).exists())
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        stop_leftovers(Session(state / JOB))


def test_up_deploys_every_region_and_status_shows_the_job_training_in_home(seen: Seen) -> None:
    for region in REGIONS:
        stack = "SpotTrainer-regions" if region == REGIONS[0] else f"SpotTrainer-regions-{region}"
        assert f"deployed {stack}: bucket " in seen.said and f", {region}\n" in seen.said, seen.said[-3000:]
    assert seen.status.returncode == 0, seen.status.stderr
    text = seen.status.stdout
    assert f"regions        active {REGIONS[0]} since " in text, text
    shown = [line.split()[0] for line in text.splitlines() if line.startswith("  ") and " wants " in line]
    assert shown == REGIONS, text  # as the job file lists them, home first
    assert f"  {REGIONS[0]:<14} wants 1, runs 1" in text and f"  {REGIONS[1]:<14} wants 0, runs 0" in text, text


def test_the_instance_reaches_aws_through_its_regions_proxy_not_moto_directly(seen: Seen) -> None:
    assert seen.instance_endpoint != seen.exports["AWS_ENDPOINT_URL"]
    assert seen.endpoint_answered == {"moto": True, "instance": True}


def test_down_destroys_every_stack_and_stops_every_server_and_instance(seen: Seen) -> None:
    assert seen.down.returncode == 0, seen.down.stderr
    assert seen.up_ended == 0, seen.said[-2000:]
    assert "destroyed SpotTrainer-regions" in seen.said and "the local AWS is stopped" in seen.said, seen.said[-2000:]
    assert seen.endpoint_answers_after == {"moto": False, "instance": False}
    assert seen.left_running == [] and not seen.folder_left
