"""Run rendered user data the way an instance does, inside a sandbox directory.

The script runs under `bash` with SPOT_ROOT=<sandbox>, the localcloud/bin stand-ins (systemctl,
nvidia-smi) first on PATH, moto as AWS and a fake IMDS, so everything it installs, writes and starts
lands below the sandbox and is a real file or process that a test can inspect and stop.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from localcloud.image_bin import image_bin
from localcloud.images import ImageFacts
from stacks.instance.runtime_wheel import runtime_wheel
from stacks.job.spec import CURRENT_USERDATA_VERSION

REPO_ROOT = Path(__file__).resolve().parents[2]
STAND_INS = REPO_ROOT / "localcloud" / "bin"
SYSTEMCTL = STAND_INS / "systemctl"
UNIT = "spot-trainer-agent.service"
# Fast retries so failure paths finish in seconds; production keeps 5 attempts from 1 s.
FAST_RETRIES = {"SPOT_RETRY_ATTEMPTS": "3", "SPOT_RETRY_BASE_MS": "100", "SPOT_RETRY_MAX_MS": "400"}


def job_header(bucket: str, package: str, **overrides: str) -> dict[str, str]:
    """The variables the stack renders (stacks/training_stack.py), filled in as at deploy time."""
    return {
        "SPOT_USERDATA_VERSION": CURRENT_USERDATA_VERSION,
        "SPOT_JOB": "cifar",
        "SPOT_STACK": "SpotTrainer-cifar",
        "SPOT_BUCKET": bucket,
        "SPOT_REGION": "us-east-1",
        "SPOT_ASG_NAME": "spot-trainer-cifar",
        "SPOT_LOG_GROUP": "/spot-trainer/cifar",
        "SPOT_COMMAND": "builtin",
        "SPOT_TRAIN_ARGS": "",
        "SPOT_WORKDIR": "/opt/spot-trainer/work",
        "SPOT_SETUP_COMMAND": "",
        "SPOT_CODE_URI": "",
        "SPOT_TRAINER_PACKAGE": package,
        "SPOT_STOP_SIGNAL": "SIGTERM",
        "SPOT_GRACE_SECONDS": "110",
        "SPOT_RESTART_BUDGET": "3",
        "SPOT_REACT_TO_REBALANCE": "false",
        "SPOT_KEEP_CHECKPOINTS": "3",
        **overrides,
    }


def build_trainer_wheel(directory: Path) -> Path:
    """The trainer package as a wheel, built from this checkout the way a release would be (the local
    synth's one cached build: concurrent builds of one checkout would share its build/ folder)."""
    wheel = runtime_wheel()
    return Path(shutil.copy2(wheel, directory / wheel.name))


def asset_key(path: Path) -> str:
    """How CDK names a file asset: its content hash, so the key says nothing of the package name."""
    return "assets/" + hashlib.sha256(path.read_bytes()).hexdigest() + path.suffix


def zip_files(source: Mapping[str, str], destination: Path) -> Path:
    with zipfile.ZipFile(destination, "w") as archive:
        for name, text in source.items():
            archive.writestr(name, text)
    return destination


@dataclass
class UserDataSandbox:
    """One pretend instance: a root directory plus the environment its user data runs with."""

    root: Path
    aws_env: Mapping[str, str]
    imds_url: str
    overrides: dict[str, str] = field(default_factory=dict)
    image: ImageFacts | None = None  # an image's own commands on the PATH, instead of this machine's

    @property
    def log_file(self) -> Path:
        return self.root / "var/log/spot-trainer/bootstrap.log"

    @property
    def env_file(self) -> Path:
        return self.root / "etc/spot-trainer/agent.env"

    @property
    def unit_file(self) -> Path:
        return self.root / "etc/systemd/system" / UNIT

    @property
    def status_file(self) -> Path:
        return self.root / "var/lib/spot-trainer/bootstrap-status.json"

    @property
    def run_dir(self) -> Path:
        return self.root / "run/systemctl"

    @property
    def journal(self) -> Path:
        return self.root / "var/log/journal" / f"{UNIT}.log"

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(STAND_INS), str(Path(sys.executable).parent), "/usr/bin", "/bin"])
        if self.image is not None:
            folder = self.root.parent / f"{self.root.name}-image-bin"
            if not folder.exists():
                image_bin(self.image, folder, aws_cli=Path(sys.executable).parent / "aws")
            path = os.pathsep.join([str(STAND_INS), str(folder)])
        return {
            "PATH": path,
            "HOME": str(self.root / "root"),
            "LANG": "C.UTF-8",
            "PIP_CONFIG_FILE": os.devnull,  # only the package sources the test names
            "SPOT_ROOT": str(self.root),
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": self.imds_url,
            # The interpreter running the tests has torch, as the Deep Learning AMI's env does.
            "SPOT_BASE_PYTHON": sys.executable,
            "SPOT_PIP_ARGS": "--no-deps --no-index",
            "SPOT_RESTART_SEC": "1",
            **FAST_RETRIES,
            **self.aws_env,
            **self.overrides,
        }

    def run(self, script: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run the script as cloud-init would (`bash <file>`), from a directory outside the sandbox."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root.parent / f"{self.root.name}-user-data.sh"
        path.write_text(script)
        return subprocess.run(
            ["bash", str(path)], env=self.env(), capture_output=True, text=True, timeout=timeout, cwd="/"
        )

    def systemctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SYSTEMCTL), *args], env=self.env(), capture_output=True, text=True, timeout=300
        )

    def calls(self) -> list[str]:
        """systemctl invocations in order, without their timestamps."""
        path = self.run_dir / "calls.log"
        return [line.split(" ", 1)[1] for line in path.read_text().splitlines()] if path.exists() else []

    def main_pid(self) -> int | None:
        path = self.run_dir / f"{UNIT}.pid"
        return int(path.read_text()) if path.exists() and path.read_text().strip() else None

    def wait_for_main_pid(self, timeout: float = 10) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = running_main_pid(self.run_dir, UNIT)
            if pid is not None:
                return pid
            time.sleep(0.05)
        raise AssertionError(f"no main process for {UNIT}; journal:\n{self.read(self.journal)}")

    def stop_agent(self) -> None:
        if self.unit_file.exists():
            self.systemctl("stop", UNIT)

    @staticmethod
    def read(path: Path) -> str:
        return path.read_text() if path.exists() else f"({path} does not exist)"


def process_cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")


def running_main_pid(run_dir: Path, unit: str) -> int | None:
    """The unit's main process once it runs the unit's program. Right after the fork that pid is still
    the stand-in's shell (then `env`), with another command line and environment."""
    try:
        pid = int((run_dir / f"{unit}.pid").read_text())
        program = (run_dir / f"{unit}.exec").read_text().split("\n", 1)[0]
        return pid if process_cmdline(pid)[0] == program else None
    except (OSError, ValueError, IndexError):
        return None


def process_environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode().rstrip("\0").split("\0")
    return dict(item.split("=", 1) for item in raw if "=" in item)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()
