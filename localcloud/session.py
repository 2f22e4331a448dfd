"""The folder a running `python -m localcloud up` keeps for the commands beside it (`env`, `interrupt`,
`down`): who it is and how to reach its local AWS, and a mailbox for what a user asks of it.

```
<state>/<job>/up.json        the up's process, its moto server's, the stack and the endpoint
<state>/<job>/env.sh         the `export AWS_...` lines that point the AWS tools at its moto
<state>/<job>/requests/      N.json asks (an interruption), N.answer is up's one-line reply
<state>/<job>/cloud/         the run's own files: the synthesized app, moto's log, every instance's sandbox
```
The default state folder is `.localcloud/up/` of the checkout; `--state DIR` picks another.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcloud.cloud import WORK_ROOT

STATE_ROOT = WORK_ROOT / "up"
# The variables every AWS tool (boto3, the aws CLI, spot-trainer) reads to talk to the local cloud.
EXPORTED = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION")


class SessionError(RuntimeError):
    """No `up` to talk to, or it did not answer; the message says which and what to run."""


def export_lines(aws_env: dict[str, str]) -> str:
    """`export NAME=VALUE` lines a shell can `eval`."""
    return "".join(f"export {name}={shlex.quote(aws_env[name])}\n" for name in EXPORTED)


def process_alive(pid: int, marker: str = "") -> bool:
    """Whether `pid` runs (not a zombie) and, given a marker, its command line holds it (not a reused pid)."""
    try:
        if b" Z " in Path(f"/proc/{pid}/stat").read_bytes():
            return False
        return marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@dataclass(frozen=True)
class Session:
    folder: Path  # <state>/<job>

    @property
    def job(self) -> str:
        return self.folder.name

    @property
    def cloud_dir(self) -> Path:
        return self.folder / "cloud"

    @property
    def env_file(self) -> Path:
        return self.folder / "env.sh"

    @property
    def _record_file(self) -> Path:
        return self.folder / "up.json"

    @property
    def _requests(self) -> Path:
        return self.folder / "requests"

    # ---- the up's side -----------------------------------------------------------------------
    def open(self, stack: str, aws_env: dict[str, str], moto_pid: int) -> None:
        """Written once the stack is deployed: from now on the commands beside it find this up."""
        self._requests.mkdir(parents=True, exist_ok=True)
        self.env_file.write_text(export_lines(aws_env))
        record = {"pid": os.getpid(), "moto_pid": moto_pid, "stack": stack, "endpoint": aws_env["AWS_ENDPOINT_URL"]}
        temporary = self._record_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(record))
        os.replace(temporary, self._record_file)

    def serve(self, reply: Callable[[str], str]) -> None:
        """Answer every request waiting: `reply(kind)` is the line the asking command prints. Only while
        the folder is this process's own: another up may have taken it since (this one's files deleted)."""
        if (self.record() or {}).get("pid") != os.getpid():
            return
        for asked in sorted(self._requests.glob("*.json")) if self._requests.is_dir() else []:
            try:
                kind = str(json.loads(asked.read_text())["kind"])
            except (OSError, ValueError, KeyError):
                kind = "?"
            answer = asked.with_suffix(".answer")
            answer.with_suffix(".tmp").write_text(reply(kind))
            os.replace(answer.with_suffix(".tmp"), answer)
            asked.unlink(missing_ok=True)

    # ---- the commands' side ------------------------------------------------------------------
    def record(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._record_file.read_text()))
        except (OSError, ValueError):
            return None

    def up_pid(self) -> int | None:
        """The running up's process, or None when none runs (never started, ended, or killed)."""
        record = self.record()
        pid = int(record["pid"]) if record else 0
        return pid if pid and process_alive(pid, "localcloud") else None

    def ask(self, kind: str, timeout: float = 30.0) -> str:
        """Leave a request for the up and wait (bounded) for its one-line answer."""
        if self.up_pid() is None:
            raise SessionError(f"no `python -m localcloud up` runs for job {self.job!r}")
        asked = self._requests / f"{time.time_ns()}.json"
        asked.with_suffix(".tmp").write_text(json.dumps({"kind": kind}))
        os.replace(asked.with_suffix(".tmp"), asked)
        answer = asked.with_suffix(".answer")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if answer.is_file():
                text = answer.read_text()
                answer.unlink(missing_ok=True)
                return text
            time.sleep(0.1)
        asked.unlink(missing_ok=True)
        raise SessionError(f"the up of job {self.job!r} did not answer within {timeout:.0f}s")

    def stop(self, timeout: float) -> bool:
        """Ctrl-C for the running up, as a terminal sends it; True once it has ended (bounded wait)."""
        pid = self.up_pid()
        if pid is None:
            return True
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not process_alive(pid):
                return True
            time.sleep(0.2)
        return False


def sessions(root: Path) -> Iterator[Session]:
    for record in sorted(root.glob("*/up.json")) if root.is_dir() else []:
        yield Session(record.parent)


def find_session(root: Path, job: str | None) -> Session:
    """The session of `job`, or with no job the only one running; one line when there is none or several."""
    if job is not None:
        return Session(root / job)
    running = [session for session in sessions(root) if session.up_pid() is not None]
    if len(running) == 1:
        return running[0]
    if not running:
        raise SessionError(f"no `python -m localcloud up` runs (state folder {root})")
    raise SessionError(f"several jobs are up ({', '.join(s.job for s in running)}): name one with --job")
