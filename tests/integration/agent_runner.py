"""Runs real agent processes against the moto server and a local IMDS, and kills them for real."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
OWN_SCRIPT = REPO_ROOT / "tests" / "fixtures" / "own_script.py"

# A training command with no Python at all, for tests about the agent rather than the trainer: one
# step-N file per step, written then renamed, progress as the built-in trainer's JSON lines; on
# SIGTERM it finishes the step it is in, saves it, prints "saved N" and exits 75.
STEPPER = ('trap "stop=1" TERM; i=${RESUME_FROM##*step-}; i=${i:-0}; '
           'while [ "$i" -lt 100000 ]; do i=$((i+1)); sleep 0.05; '
           'echo "{\\"event\\": \\"step\\", \\"step\\": $i, \\"loss\\": 0.5, \\"samples_per_s\\": 64}"; '
           'if [ $((i % 10)) -eq 0 ] || [ -n "${stop:-}" ]; then echo $i > "$CHECKPOINT_DIR/.t"; '
           'mv "$CHECKPOINT_DIR/.t" "$CHECKPOINT_DIR/step-$i"; fi; '
           'if [ -n "${stop:-}" ]; then echo "saved $i"; exit 75; fi; done')


def agent_env(aws_env: dict[str, str], *, bucket: str, job: str, checkpoint_dir: Path, imds_url: str,
              instance_id: str, command: str, **settings: str) -> dict[str, str]:
    """Environment of one agent: fast polling and a short lease so tests take seconds, not minutes."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SPOT_")}
    env.update(aws_env)
    env.update({
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds_url,
        "SPOT_JOB": job, "SPOT_BUCKET": bucket, "SPOT_COMMAND": command,
        "SPOT_CHECKPOINT_DIR": str(checkpoint_dir), "SPOT_INSTANCE_ID": instance_id,
        "SPOT_POLL_SECONDS": "0.2", "SPOT_LEASE_TTL_SECONDS": "4", "SPOT_GRACE_SECONDS": "60",
        "SPOT_STATUS_INTERVAL": "1", "PYTHONUNBUFFERED": "1",
    })
    env.update({f"SPOT_{key.upper()}": value for key, value in settings.items()})
    return env


def create_log_group(env: dict[str, str]) -> None:
    """The stack's part: the job's log group exists before any instance starts (the role may not create it)."""
    if "AWS_ENDPOINT_URL" not in env:
        return
    import boto3  # here: the CUDA checks import this module on a bare machine, without boto3

    logs = boto3.client("logs", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env.get("AWS_DEFAULT_REGION"),
                        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
                        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"))
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=env.get("SPOT_LOG_GROUP") or f"/spot-trainer/{env['SPOT_JOB']}")


@dataclass
class AgentProcess:
    """`python -P -m spot_trainer agent` (as the unit starts it) in its own session; output line by line."""

    env: dict[str, str]
    cwd: Path = REPO_ROOT
    lines: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # time.monotonic() when each line arrived
    process: subprocess.Popen[str] | None = None
    _readers: list[threading.Thread] = field(default_factory=list)

    def start(self) -> AgentProcess:
        create_log_group(self.env)
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "spot_trainer", "agent"], env=self.env, cwd=self.cwd, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        for pipe in (self.process.stdout, self.process.stderr):
            reader = threading.Thread(target=self._collect, args=(pipe,), daemon=True)
            reader.start()
            self._readers.append(reader)
        return self

    def _collect(self, pipe) -> None:  # type: ignore[no-untyped-def]
        for line in pipe:
            self.times.append(time.monotonic())
            self.lines.append(line.rstrip("\n"))

    def wait(self, timeout: float = 120) -> int:
        assert self.process is not None
        code = self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=5)
        return code

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.process is not None and self.process.poll() is not None and not predicate():
                code = self.process.returncode
                raise AssertionError(f"agent exited ({code}) before {what}:\n{self.text()}")
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}:\n{self.text()}")

    def events(self, kind: str) -> list[dict]:
        """JSON lines the command printed with {"event": kind}."""
        found = []
        for line in list(self.lines):
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("event") == kind:
                    found.append(record)
        return found

    def first_time(self, predicate: Callable[[str], bool]) -> float | None:
        """When the first line matching `predicate` arrived."""
        return next((at for at, line in zip(list(self.times), list(self.lines), strict=False) if predicate(line)), None)

    def publishes(self) -> bool:
        """Several nodes: this node's latest round, as its agent logged it, makes it the publisher."""
        latest = next((line for line in reversed(self.lines) if "group rank" in line), "")
        return "(publishes)" in latest

    def text(self) -> str:
        return "\n".join(self.lines[-60:])

    def kill_tree(self) -> None:
        """SIGKILL the agent and every process below it, as a dying instance would."""
        assert self.process is not None
        victims = [self.process.pid, *descendants(self.process.pid)]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=10)

    def freeze(self) -> None:
        """SIGSTOP the agent and everything below it: a node that goes silent without closing a
        socket, as a power-off does."""
        assert self.process is not None
        for pid in [self.process.pid, *descendants(self.process.pid)]:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill_tree()

    def power_off_when(self, ready: Callable[[], bool], what: str, timeout: float = 240) -> None:
        """Once `ready`, die as an instance powered off without notice does; stopped whatever happens."""
        try:
            self.wait_for(ready, timeout=timeout, what=what)
            self.kill_tree()
        finally:
            self.stop()

    def run_to_the_end(self, timeout: float = 300) -> None:
        """Wait for the agent to exit 0, the job done; stopped whatever happens."""
        try:
            assert self.wait(timeout=timeout) == 0, self.text()
        finally:
            self.stop()


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found
