"""The training command as a child process group: start, stream its output, signal, wait with grace.

The command runs in its own process group so a stop signal reaches every process it started
(a shell wrapper, data loader workers), and "exited" means the whole group is gone: a shell that
dies on SIGTERM while its Python child is still writing the emergency checkpoint is not "done".
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ...command_text import Program

LineSink = Callable[[str, str], None]  # (stream name "stdout"/"stderr", line without newline)

# The runtime's own import name (spot_trainer once installed), whatever the source folder is called.
RUNTIME_PACKAGE = (__package__ or "spot_trainer").split(".")[0]


def runtime_argv(*args: str) -> list[str]:
    """`python -P -m spot_trainer ARGS`: -P keeps the job's working directory off sys.path, so a job's
    own `trainer.py` or `spot_trainer/` cannot stand in for the runtime."""
    return [sys.executable, "-P", "-m", RUNTIME_PACKAGE, *args]


def program_argv(program: Program, train_args: str) -> list[str]:
    """What trains, on a node alone or as each rank of several: the built-in trainer with the job's
    arguments, or the user's own command through bash."""
    if program.builtin:
        return runtime_argv("train", *shlex.split(train_args))
    return ["/bin/bash", "-c", program.command]


# Its sitecustomize.py makes a command's HF or Lightning script resume when it never asks to
# (integrations/auto_resume.py); Python runs it at start-up from the first folder on PYTHONPATH.
AUTO_RESUME_PATH = Path(__file__).resolve().parents[2] / "integrations" / "python-startup"


def with_auto_resume(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with AUTO_RESUME_PATH first on PYTHONPATH, before what the command's environment had there."""
    paths = [str(AUTO_RESUME_PATH), *(path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path)]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


@dataclass
class CommandProcess:
    """One run of the training command. Output lines go to `sink` from reader threads."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str | None = None
    sink: LineSink = lambda stream, line: None
    process: subprocess.Popen[bytes] | None = None
    last_stderr_line: str = ""
    _readers: list[threading.Thread] = field(default_factory=list)

    def start(self) -> CommandProcess:
        self.process = subprocess.Popen(
            list(self.argv),
            env=dict(self.env),
            cwd=self.cwd or None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            process_group=0,
        )
        assert self.process.stdout and self.process.stderr
        for name, pipe in (("stdout", self.process.stdout), ("stderr", self.process.stderr)):
            reader = threading.Thread(target=self._pump, args=(name, pipe), daemon=True)
            reader.start()
            self._readers.append(reader)
        return self

    def _pump(self, name: str, pipe: IO[bytes]) -> None:
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if name == "stderr" and line.strip():
                self.last_stderr_line = line.strip()
            try:
                self.sink(name, line)
            except Exception:  # a failing sink must never stall the pipe (the child would block)
                pass
        pipe.close()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def poll(self) -> int | None:
        """The exit code once the main process has exited, else None."""
        assert self.process is not None
        return self.process.poll()

    def signal_group(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # a member changed user: still alive
            return True
        return True

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the main process and then for the rest of its group; None if time ran out."""
        assert self.process is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        while self.group_alive():
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        self.join_output(timeout=2.0)
        return self.process.returncode

    def stop(self, sig: signal.Signals, grace_seconds: float, after_signal: Callable[[], None] | None = None) -> int:
        """Send `sig` to the group, then run `after_signal` (work that must not delay the signal), wait
        what is left of the grace period, then SIGKILL what is left of the command."""
        self.signal_group(sig)
        signalled = time.monotonic()
        if after_signal is not None:
            after_signal()
        code = self.wait(timeout=max(0.0, grace_seconds - (time.monotonic() - signalled)))
        if code is None:
            self.signal_group(signal.SIGKILL)
            code = self.wait(timeout=10.0)
        return code if code is not None else -int(signal.SIGKILL)

    def join_output(self, timeout: float) -> None:
        """Let the readers drain what the command wrote before it exited."""
        for reader in self._readers:
            reader.join(timeout=timeout)
