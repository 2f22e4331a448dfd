"""One pretend EC2 instance: a sandbox root, its own IMDS, the launch template's user data run by bash.

Everything the instance starts (user data, the systemctl stand-in's supervisor, the agent, the
training command) carries the sandbox root in its environment (SPOT_ROOT, PYTHONPATH, the checkpoint
directory); that is how `kill` finds the whole tree even after processes re-parent or start their
own sessions, as a real instance losing power would lose them all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from localcloud.fake_imds import FakeImds, RoleCredentials
from localcloud.image_bin import image_bin
from localcloud.images import ImageFacts
from spot_trainer.agent.instance.env_file import read_env_text

REPO_ROOT = Path(__file__).resolve().parent.parent
STAND_INS = REPO_ROOT / "localcloud" / "bin"
UNIT = "spot-trainer-agent.service"
AGENT_SETTINGS = "etc/spot-trainer/agent.env"  # where user data writes the agent's settings (userdata/lib/settings.sh)
STATIC_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# Agent cadence for a local run: notices seen within half a second, a dead holder's lease free in 12 s.
AGENT_TUNING = {
    "SPOT_POLL_SECONDS": "0.5",
    "SPOT_LEASE_TTL_SECONDS": "12",
    "SPOT_STATUS_INTERVAL": "1",
    "SPOT_HEARTBEAT_SECONDS": "1",  # instance records: a power-off is billed to within a second
    "SPOT_RDZV_LAST_CALL_SECONDS": "3",  # several nodes: a round waits 3 s for late joiners, not 15
    "SPOT_RDZV_KEEP_ALIVE_SECONDS": "2",  # and drops a dead node after 6 s, not 15
    "SPOT_RESTART_SEC": "1",
    "SPOT_RETRY_ATTEMPTS": "3",
    "SPOT_RETRY_BASE_MS": "200",
    "SPOT_RETRY_MAX_MS": "1000",
}


@dataclass
class Instance:
    instance_id: str
    instance_type: str
    root: Path
    aws_env: dict[str, str]
    settings: dict[str, str] = field(default_factory=dict)  # extra SPOT_* for the agent (tests)
    local_ipv4: str = "127.0.0.1"  # its own loopback address, so several nodes tell each other apart
    market: str = "spot"  # what IMDS instance-life-cycle says, and what the cost report bills it as
    role: RoleCredentials | None = None  # its instance profile's: then its IMDS is its only credentials
    imds: FakeImds | None = None
    # Played as it is (its commands, its Python, nothing installed) instead of this machine's interpreter
    # with torch; pip finds packages only where the instance's environment points it (PIP_FIND_LINKS).
    image: ImageFacts | None = None
    bootstrap: subprocess.Popen[bytes] | None = None
    launched_at: float = 0.0
    ended_at: float | None = None
    announced_at: float | None = None
    hard_killed: bool = False

    # ---- paths ---------------------------------------------------------------------------------
    @property
    def journal(self) -> Path:
        return self.root / "var/log/journal" / f"{UNIT}.log"

    @property
    def console(self) -> Path:
        """stdout and stderr of the user data, as the EC2 console output shows them."""
        return self.root.parent / f"{self.instance_id}-console.log"

    def agent_settings(self) -> dict[str, str]:
        """The agent's settings as its user data wrote them ({} before the user data got that far)."""
        try:
            return read_env_text((self.root / AGENT_SETTINGS).read_text()).entries
        except OSError:
            return {}

    @property
    def checkpoint_dir(self) -> Path | None:
        """CHECKPOINT_DIR as its user data gave it to the agent, where its command saved."""
        folder = self.agent_settings().get("SPOT_CHECKPOINT_DIR")
        return Path(folder) if folder else None

    # ---- lifecycle -------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        assert self.imds is not None
        return {
            **(self._image_env() if self.image else self._this_machine_env()),
            "HOME": str(self.root / "root"),
            "LANG": "C.UTF-8",
            "SPOT_ROOT": str(self.root),
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": self.imds.url,
            **AGENT_TUNING,
            **self._aws_env(),
            **self.settings,
            # Its boot time: this host's /proc/uptime is not the instance's.
            "SPOT_LAUNCHED_AT": f"{self.launched_at:.3f}",
        }

    @staticmethod
    def _this_machine_env() -> dict[str, str]:
        """This interpreter has torch, as the Deep Learning AMI's env does; no network for pip."""
        return {"PATH": os.pathsep.join([str(STAND_INS), str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
                "SPOT_BASE_PYTHON": sys.executable, "SPOT_PIP_ARGS": "--no-deps --no-index"}

    def _image_env(self) -> dict[str, str]:
        """The image's commands only; no PyTorch env where it has none; pip with no configuration of this
        machine's, so it installs the runtime's dependencies as on AWS, from the sources it is given."""
        assert self.image is not None
        if self.image.pytorch_env:
            raise ValueError(f"{self.image.name}: an image with a PyTorch env is played by this machine's "
                             "interpreter (leave the image unset)")
        folder = self.root.parent / f"{self.instance_id}-image-bin"
        if not folder.exists():
            image_bin(self.image, folder, aws_cli=Path(sys.executable).parent / "aws")
        return {"PATH": os.pathsep.join([str(STAND_INS), str(folder)]), "PIP_CONFIG_FILE": os.devnull,
                "SPOT_BASE_PYTHON": "", "SPOT_PYTHON_CANDIDATES": str(self.root / "opt/pytorch/bin/python"),
                "SPOT_PIP_ARGS": ""}

    def _aws_env(self) -> dict[str, str]:
        """Endpoint and region; the deployer's credentials only for an instance without a role."""
        if self.role is None:
            return dict(self.aws_env)
        return {k: v for k, v in self.aws_env.items() if k not in STATIC_CREDENTIALS}

    def launch(self, user_data: str) -> Instance:
        """Boot: start the metadata service, then run the user data the way cloud-init does."""
        self.root.mkdir(parents=True, exist_ok=True)
        region = self.aws_env.get("AWS_DEFAULT_REGION", "us-east-1")
        self.imds = FakeImds(instance_id=self.instance_id, region=region, instance_type=self.instance_type,
                             local_ipv4=self.local_ipv4, market=self.market, role=self.role).start()
        script = self.root.parent / f"{self.instance_id}-user-data.sh"
        script.write_text(user_data)
        self.launched_at = time.time()
        with open(self.console, "ab") as console:
            self.bootstrap = subprocess.Popen(
                ["bash", str(script)], env=self.env(), stdout=console, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd="/", start_new_session=True,
            )
        return self

    def announce(self, notice_seconds: float, *, rebalance: bool = False) -> None:
        """The two-minute warning (scaled): spot/instance-action, and a rebalance recommendation first."""
        assert self.imds is not None
        if rebalance:
            self.imds.recommend_rebalance()
        self.imds.announce_interruption("terminate", in_seconds=notice_seconds)
        self.announced_at = time.time()

    def scale_in(self) -> None:
        """Chosen for scale-in: the group's termination hook holds it in Terminating:Wait, and
        autoscaling/target-lifecycle-state says Terminated."""
        if self.imds is not None and self.ended_at is None:
            self.imds.set_target_lifecycle_state("Terminated")

    def kill(self, timeout: float = 10.0) -> None:
        """Power off: SIGKILL every process of this instance until none is left, then stop its IMDS."""
        if self.bootstrap is not None and self.bootstrap.poll() is None:
            try:
                os.killpg(self.bootstrap.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while (pids := self.processes()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        if self.bootstrap is not None:
            self.bootstrap.wait(timeout=timeout)
        if self.imds is not None:
            self.imds.stop()
        if self.ended_at is None:
            self.ended_at = time.time()

    # ---- what is running -----------------------------------------------------------------------
    def processes(self) -> list[int]:
        """Live processes whose environment points into this instance's root (zombies excluded)."""
        marker = str(self.root)
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                if b" Z " in (entry / "stat").read_bytes():
                    continue
            except OSError:
                continue
            if any(_points_into(value, marker) for value in environ.split(b"\0")):
                found.append(int(entry.name))
        return found

    def agent_pid(self) -> int | None:
        """The agent's process (the unit's main process) while it runs."""
        try:
            pid = int((self.root / "run/systemctl" / f"{UNIT}.pid").read_text())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid if b" Z " not in Path(f"/proc/{pid}/stat").read_bytes() else None

    def booting(self) -> bool:
        return self.bootstrap is not None and self.bootstrap.poll() is None

    def bootstrap_failed(self) -> str | None:
        """The failure the user data recorded, if it gave up."""
        if self.bootstrap is None or self.bootstrap.poll() in (None, 0):
            return None
        status = self.root / "var/lib/spot-trainer/bootstrap-status.json"
        try:
            return str(json.loads(status.read_text()).get("reason", "user data failed"))
        except (OSError, ValueError):
            return f"user data exited with {self.bootstrap.returncode}"

    def uptime(self, now: float | None = None) -> float:
        end = self.ended_at if self.ended_at is not None else (now or time.time())
        return max(0.0, end - self.launched_at) if self.launched_at else 0.0


def _points_into(entry: bytes, marker: str) -> bool:
    _, _, value = entry.partition(b"=")
    for part in value.decode(errors="replace").split(os.pathsep):
        if part == marker or part.startswith(marker + "/"):
            return True
    return False
