"""The host stand-ins the sandbox and the local spot cloud rely on: they must behave like the real
systemctl (for the unit user data writes) and nvidia-smi, with real processes and signals."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.userdata_sandbox import STAND_INS, alive, process_environ, running_main_pid

SYSTEMCTL = STAND_INS / "systemctl"


class Host:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "etc/systemd/system").mkdir(parents=True)

    def unit(self, name: str, body: str) -> None:
        (self.root / "etc/systemd/system" / name).write_text(f"[Service]\n{body}")

    def systemctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "SPOT_ROOT": str(self.root), "AWS_ACCESS_KEY_ID": "from-profile",
               "NOT_PASSED": "caller-only"}
        return subprocess.run([str(SYSTEMCTL), *args], env=env, capture_output=True, text=True, timeout=60)

    def pid(self, name: str) -> int:
        return int((self.root / "run/systemctl" / f"{name}.pid").read_text())

    def script(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text("#!/usr/bin/env bash\n" + text)
        path.chmod(0o755)
        return path


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    box = Host(tmp_path)
    yield box
    for unit in (tmp_path / "etc/systemd/system").iterdir():
        box.systemctl("stop", unit.name)


def wait_until(condition, timeout: float = 10) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_start_runs_the_unit_with_a_clean_environment(host: Host, tmp_path: Path) -> None:
    (tmp_path / "agent.env").write_text(
        '# settings\nSPOT_COMMAND="python train.py --cost \'$5\' --q \\"x\\""\nB=two words\n'
    )
    host.unit("a.service", f"EnvironmentFile={tmp_path}/agent.env\nEnvironment=PATH=/usr/bin:/bin\n"
                           f"WorkingDirectory={tmp_path}\nExecStart=/bin/sleep 30\n")
    assert host.systemctl("start", "a.service").returncode == 0
    wait_until(lambda: running_main_pid(host.root / "run/systemctl", "a.service") is not None)
    pid = host.pid("a.service")
    environ = process_environ(pid)
    assert environ["SPOT_COMMAND"] == """python train.py --cost '$5' --q "x\""""
    assert environ["B"] == "two words" and environ["PATH"] == "/usr/bin:/bin"
    assert environ["AWS_ACCESS_KEY_ID"] == "from-profile" and "NOT_PASSED" not in environ
    assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path)
    assert os.getpgid(pid) != os.getpgid(0), "a service runs in its own process group"
    assert host.systemctl("is-active", "a.service").stdout.strip() == "active"
    assert host.systemctl("start", "a.service").returncode == 0
    assert host.pid("a.service") == pid, "start on an active unit starts nothing"


def command_line(pid_file: Path) -> bytes:
    """The command line of the process a pid file names; empty while the file or process is gone
    (the supervisor rewrites the file only after the restart)."""
    try:
        return Path(f"/proc/{int(pid_file.read_text())}/cmdline").read_bytes()
    except (OSError, ValueError):
        return b""


def test_failed_main_process_is_restarted_on_failure(host: Host, tmp_path: Path) -> None:
    marker = tmp_path / "ran-once"
    script = host.script("flaky.sh", f'if [[ -e {marker} ]]; then exec sleep 30; fi\ntouch {marker}\nexit 3\n')
    host.unit("b.service", f"ExecStart={script}\nRestart=on-failure\nRestartSec=0\n")
    host.systemctl("start", "b.service")
    wait_until(lambda: marker.exists() and (tmp_path / "run/systemctl/b.service.result").exists())
    assert (tmp_path / "run/systemctl/b.service.result").read_text().strip() == "3"
    wait_until(lambda: command_line(tmp_path / "run/systemctl/b.service.pid").startswith(b"sleep"))
    assert host.systemctl("is-active", "b.service").returncode == 0


def test_stop_terms_the_main_process_then_kills_what_is_left(host: Host, tmp_path: Path) -> None:
    # The main process ignores SIGTERM and has a child: KillMode=mixed ends both after the timeout.
    script = host.script("stubborn.sh", f"trap '' TERM\nsleep 300 &\necho $! > {tmp_path}/child\nwait\n")
    host.unit("c.service", f"ExecStart={script}\nKillMode=mixed\nTimeoutStopSec=1\n")
    host.systemctl("start", "c.service")
    wait_until(lambda: (tmp_path / "child").exists() and (tmp_path / "child").read_text().strip() != "")
    main, child = host.pid("c.service"), int((tmp_path / "child").read_text())
    started = time.monotonic()
    assert host.systemctl("stop", "c.service").returncode == 0
    assert time.monotonic() - started >= 1
    wait_until(lambda: not alive(main) and not alive(child), timeout=5)
    assert host.systemctl("is-active", "c.service").returncode == 3


def test_enable_and_daemon_reload_are_recorded(host: Host) -> None:
    host.unit("d.service", "ExecStart=/bin/true\n")
    assert host.systemctl("daemon-reload").returncode == 0
    assert host.systemctl("enable", "d.service").returncode == 0
    assert (host.root / "run/systemctl/enabled/d.service").exists()
    calls = (host.root / "run/systemctl/calls.log").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in calls] == ["daemon-reload ", "enable d.service"]


def test_unknown_unit_and_command_are_named(host: Host) -> None:
    missing = host.systemctl("start", "nope.service")
    assert missing.returncode != 0 and "unit nope.service not found" in missing.stderr
    odd = host.systemctl("frobnicate", "x.service")
    assert odd.returncode != 0 and "unsupported command 'frobnicate'" in odd.stderr


def nvidia_smi(*args: str, gpus: int = 0) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "SPOT_FAKE_GPU_COUNT": str(gpus)}
    return subprocess.run([str(STAND_INS / "nvidia-smi"), *args], env=env, capture_output=True, text=True)


def test_nvidia_smi_reports_no_gpu_by_default() -> None:
    result = nvidia_smi("--query-gpu=name", "--format=csv,noheader")
    assert result.returncode == 1 and result.stdout == "" and "NVIDIA driver" in result.stderr


def test_nvidia_smi_lists_requested_gpus() -> None:
    result = nvidia_smi("--query-gpu=name,memory.total", "--format=csv,noheader,nounits", gpus=2)
    assert result.returncode == 0 and result.stdout.splitlines() == ["NVIDIA A10G, 23028"] * 2
    assert nvidia_smi("-L", gpus=1).stdout.startswith("GPU 0: NVIDIA A10G (GPU-")
