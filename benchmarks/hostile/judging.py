"""Running one command as a user would, and judging what came back: the outcomes of the sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

OUTCOMES = ("clear", "at_start", "intended", "unclear", "traceback", "accepted", "hangs")
# Accepted on purpose, and why (area, case): the sweep says so instead of counting them as wrong.
INTENDED = {
    ("jobs", "name in the file differs from the file name"):
        "`name` names the stack (SpotTrainer-<name>), its bucket prefix and log group; -c job= and the demo read it",
    ("console", "example: Distributed with Nodes 1"):
        "one node trains under torchrun and the world grows when Nodes is raised; the job file refuses it as a slip",
    ("console", "example: KeyPair='my key; rm -rf /'"):
        "a valid EC2 key pair name (any ASCII up to 255 characters); it never reaches a shell, EC2 checks it exists",
    ("console", "example: Deadline='2020-01-01T00:00:00Z'"):
        "the agent says at start that the deadline cannot be kept (log, status.json, events) and trains on spot",
    ("agent", "SPOT_TOTAL_STEPS=0 with a deadline, own command"):
        "the deadline is said not kept (log, status.json, events) and the job trains on spot",
    ("cli", "demo --hard-kill 5"): "five power-offs without notice, then the default three announced interruptions",
    ("jobs", "here-doc delimiter in setup"):
        "from user data v2 a deploy-time value travels base64-encoded: the lines stay inside the setup command",
}
PROGRESS = ("synthesizing ",)  # the demo's own progress lines: what it is doing, not what went wrong
EXAMPLE: dict[str, Any] = tomllib.loads((REPO / "jobs" / "example.toml").read_text())
CLOSED = "http://127.0.0.1:9"  # nothing listens on the discard port: any AWS or IMDS call fails at once
AWS_OFFLINE = {"AWS_ENDPOINT_URL": CLOSED, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
               "AWS_EC2_METADATA_SERVICE_ENDPOINT": CLOSED, "AWS_DEFAULT_REGION": "us-east-1"}
DEMO_REACHED = 97  # exit code of the stubbed LocalCloud: every argument check passed
NOISE = ("!!", "(node:", "(Use `node --trace", "[WARNING]", "DeprecationWarning", "jsii")


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None: killed at the time limit
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Verdict:
    area: str
    case: str
    outcome: str
    output: str


@dataclass(frozen=True)
class Probe:
    """One command a user would run, and how to judge what came back."""

    area: str
    case: str
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    expect: str
    judge: Callable[[Finished, str], tuple[str, str]]
    timeout: float = 60.0
    heavy: bool = False  # CPU-bound (a synth, torch): run at most one per core


# ---- running and judging commands ------------------------------------------------------------------


def run_command(argv: Sequence[str], cwd: Path, env: dict[str, str], timeout: float) -> Finished:
    """Run in its own process group; at the time limit the whole group is killed."""
    with subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            code = None
    return Finished(code, out.decode(errors="replace"), err.decode(errors="replace"))


def meaningful_lines(text: str) -> list[str]:
    """Non-empty lines less CDK/node/jsii warnings and argparse's usage block."""
    lines: list[str] = []
    in_usage = False
    for line in text.splitlines():
        if not line.strip() or any(line.lstrip().startswith(n) or n in line for n in NOISE):
            continue
        if line.startswith("usage:"):
            in_usage = True
            continue
        if in_usage and line.startswith(" "):
            continue
        in_usage = False
        lines.append(line.rstrip())
    return lines


def traceback_line(finished: Finished) -> str:
    lines = [line for line in finished.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "Traceback"


def first_line(finished: Finished) -> str:
    lines = meaningful_lines(finished.stderr) or meaningful_lines(finished.stdout)
    return lines[0] if lines else f"(no output, exit {finished.returncode})"


def judge_synth(finished: Finished, expect: str) -> tuple[str, str]:
    """jobs: exit 2 and exactly one `spot-trainer: ` line naming the field."""
    if finished.returncode is None:
        return "hangs", "no answer within the time limit"
    if "Traceback" in finished.stderr:
        return "traceback", traceback_line(finished)
    if finished.returncode == 0:
        return "accepted", "synthesized (exit 0)"
    lines = meaningful_lines(finished.stderr)
    clear = (finished.returncode == 2 and len(lines) == 1 and lines[0].startswith("spot-trainer: ")
             and expect in lines[0])
    return ("clear" if clear else "unclear"), first_line(finished)


def judge_agent(finished: Finished, expect: str) -> tuple[str, str]:
    """agent: exit 2 and a first line `spot-trainer: …` naming the setting; past the checks: accepted."""
    if finished.returncode is None:
        return "hangs", "no answer within the time limit"
    if "Traceback" in finished.stderr:
        return "traceback", traceback_line(finished)
    first = first_line(finished)
    if finished.returncode == 2 and first.startswith("spot-trainer: ") and expect in first:
        return "clear", first
    if "bad configuration" in first or "cannot read" in first or finished.returncode == 2:
        return "unclear", first
    warned = [line for line in meaningful_lines(finished.stderr) if "WARNING" in line and expect in line]
    return ("intended", warned[0]) if warned else ("accepted", first)


def judge_cli(finished: Finished, expect: str) -> tuple[str, str]:
    """cli: non-zero and one line (besides argparse's usage) naming the flag."""
    if finished.returncode is None:
        return "hangs", "no answer within the time limit"
    if "Traceback" in finished.stderr:
        return "traceback", traceback_line(finished)
    if finished.returncode == DEMO_REACHED:
        return "accepted", "every check passed (flags, the job's synth): a real demo would start moto and deploy"
    if finished.returncode == 0:
        return "accepted", f"exit 0: {first_line(finished)}"
    lines = [line for line in meaningful_lines(finished.stderr) if not line.startswith(PROGRESS)]
    clear = len(lines) == 1 and expect in lines[0]
    return ("clear" if clear else "unclear"), (lines or [first_line(finished)])[0]


def verdict_of(probe: Probe) -> Verdict:
    finished = run_command(probe.argv, probe.cwd, probe.env, probe.timeout)
    outcome, output = probe.judge(finished, probe.expect)
    return intended(Verdict(probe.area, probe.case, outcome, output[:300]))


def intended(verdict: Verdict) -> Verdict:
    reason = INTENDED.get((verdict.area, verdict.case))
    if verdict.outcome == "accepted" and reason:
        return Verdict(verdict.area, verdict.case, "intended", reason)
    return verdict
