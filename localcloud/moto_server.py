"""Run moto in server mode on 127.0.0.1 as a stand-in for the AWS API."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from localcloud.region_capacity import BOARD_ENV
from localcloud.served import Served

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DECISIONS_ENV = "LOCALCLOUD_IAM_DECISIONS"  # the file moto appends its IAM decisions to (moto_iam.py)
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class MotoServer(Served):
    """A moto_server child process (with localcloud.moto_app's additions).

    `endpoint` uses `localhost`: moto parses bucket paths only then."""

    port: int = 0
    log_path: Path | None = None
    iam_decisions: Path | None = None  # where moto appends its IAM decisions (localcloud/moto_iam.py)
    capacity_board: Path | None = None  # the regions' spot capacity moto answers from (localcloud/region_capacity.py)
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://localhost:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment for a client (boto3, aws CLI, cdk) that should talk to this server."""
        return {**DUMMY_CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    # Importing moto takes ~3 s of CPU; on two cores busy with other servers and instances it was seen to take 26 s.
    def start(self, timeout: float = 120.0) -> MotoServer:
        """Start and wait until it answers. A port picked here may be taken by another process before
        moto binds it (test workers start servers side by side): then a fresh port, twice at most."""
        chosen = self.port
        for _ in range(3):
            self.port = chosen or free_port()
            if self._start_on_port(timeout):
                return self
            if chosen:
                break
        raise RuntimeError(f"moto_server exited early with code {self.process and self.process.returncode}")

    def _start_on_port(self, timeout: float) -> bool:
        """True once the server answers; False when it exited first (the port was taken)."""
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [sys.executable, "-m", "localcloud.moto_app", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **DUMMY_CREDENTIALS,
                 **({DECISIONS_ENV: str(self.iam_decisions)} if self.iam_decisions else {}),
                 **({BOARD_ENV: str(self.capacity_board)} if self.capacity_board else {})},
            cwd=PROJECT_ROOT,  # for localcloud.moto_app
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return True
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.endpoint} within {timeout}s")

    def reset(self) -> None:
        """Forget every resource (moto's own reset API)."""
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=10).close()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
