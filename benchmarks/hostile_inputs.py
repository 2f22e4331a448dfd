"""Hostile inputs: how clearly careless and hostile input is refused, as a user would meet it.

Four areas, each case run the way a user runs it:
  jobs      a job file (wrong types, bad values, broken files) through the real synth, `python app.py`
            with CDK_CONTEXT_JSON, as tests/unit/test_job_spec.py does
  console   a value typed into the CloudFormation console for jobs/example.toml and jobs/cifar.toml,
            judged by the synthesized template's own AllowedPattern/AllowedValues/MaxLength/Min/MaxValue
            and its Rules (the evaluator of tests/unit/test_console_rules.py)
  agent     one bad line in the agent's environment file, `python -m spot_trainer agent --env-file F`,
            with every AWS endpoint on a closed port (the agent's attempt to record FAILED fails fast)
  cli       bad flags of `python -m spot_trainer {status,train,agent}` and `python -m localcloud demo`;
            demo cases run every check the real demo makes, the job's `cdk synth` included, and a case
            that passes them all ends with exit 97 ("a real demo would start") instead of starting moto

Outcomes per case:
  clear      refused (non-zero exit) with one line that names the field, setting or flag expected
             (jobs: exit 2 and one "spot-trainer: " line; agent: exit 2 and a first line naming the
             setting; console: refused with a ConstraintDescription or an AssertDescription; cli: one
             line besides argparse's usage block)
  at_start   console: the template takes it, and the agent's own checks refuse it when the first instance
             starts (the job ends FAILED with that line and the group goes to zero)
  intended   accepted on purpose (INTENDED says why), or accepted with a warning line naming the input
  unclear    refused, but not in one line naming what is wrong (console: refused with no description)
  traceback  a Python traceback reached the user
  accepted   the input went through (synth succeeded, the console takes it, the agent started, the
             command ran or a demo would start)
  hangs      no answer within the time limit (the process group is killed)

Each not-clear case is listed with its first relevant output line (for a traceback, its last line).
Everything is written under one temporary directory; nothing listens, nothing stays running.
Runs offline in about four minutes on two cores.

    .venv/bin/python benchmarks/hostile_inputs.py [--workers CORES] [--areas jobs console agent cli]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
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


# ---- area 1: job files through the real synth --------------------------------------------------------


@dataclass(frozen=True)
class JobCase:
    case: str
    expect: str  # what the one line must name: a field, or "UTF-8"/"TOML" for a broken file
    content: dict[str, Any] | bytes | str | None  # None: no file is written
    filename: str = "job.toml"
    context: str | None = None  # the `-c job=` value; "{dir}" is the case's folder; default: the file
    dirs: tuple[str, ...] = ()  # folders made next to the job file
    files: tuple[str, ...] = ()  # empty files made next to the job file


def changed(section: str | None, key: str, value: Any) -> dict[str, Any]:
    """The example job with one value changed (section None: a top-level key)."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in EXAMPLE.items()}
    target = data.setdefault(section, {}) if section else data
    target[key] = value
    return data


def with_section(section: str, **values: Any) -> dict[str, Any]:
    data = changed(None, section, {**EXAMPLE.get(section, {}), **values})
    return data


def own_command(**run: Any) -> dict[str, Any]:
    """The example with its own command instead of the built-in trainer."""
    return changed(None, "run", {"command": "python train.py", **run})


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def toml_text(data: dict[str, Any]) -> str:
    """A TOML document: top-level values first, then one [table] per dict of plain values."""
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in data.items() if k not in tables]
    for name, table in tables.items():
        lines += ["", f"[{json.dumps(name)}]"] + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def example_text() -> str:
    return (REPO / "jobs" / "example.toml").read_text()


def broken_file_cases() -> list[JobCase]:
    text = example_text()
    return [
        JobCase("empty file", "run.train_args", b""),
        JobCase("Latin-1 bytes (café)", "UTF-8", 'description = "café"\n'.encode("latin-1")),
        JobCase("binary bytes", "UTF-8", bytes(range(256))),
        JobCase("saved as UTF-16", "UTF-8", text.encode("utf-16")),
        JobCase("a table given twice", "TOML", text + '\n[run]\ncommand = "python train.py"\n'),
        JobCase("JSON instead of TOML", "TOML", json.dumps(EXAMPLE, indent=2)),
        JobCase("YAML instead of TOML", "TOML", "run:\n  command: builtin\n"),
        JobCase("unquoted string value", "TOML", '[run]\ncommand = python train.py\n'),
        JobCase("word-processor quotes", "TOML", '[run]\ncommand = \u201cbuiltin\u201d\n'),
        JobCase("job path does not exist", "nope.toml", None, context="{dir}/nope.toml"),
        JobCase("job path is a folder", "no file", None, context="{dir}/"),
        JobCase("job name in capitals", "Example", None, context="Example"),
        JobCase("job given as an empty string", "job", None, context=""),
        JobCase("file name with a space", "name", text, filename="My Job.toml"),
    ]


def key_cases() -> list[JobCase]:
    return [
        JobCase("unknown section [runn]", "runn", changed(None, "runn", {"command": "builtin"})),
        JobCase("unknown key run.comand", "run.comand", changed("run", "comand", "python train.py")),
        JobCase("capacity key at the top level", "nodes", changed(None, "nodes", 2)),
        JobCase("section given as a string", "run", changed(None, "run", "builtin")),
        JobCase("section as an array of tables", "capacity",
                toml_text({k: v for k, v in EXAMPLE.items() if k != "capacity"})
                + '\n[[capacity]]\nnodes = 1\n[[capacity]]\nnodes = 2\n'),
    ]


WRONG_TYPES: list[tuple[str | None, str, Any]] = [
    ("run", "command", 1), ("run", "train_args", ["--model", "lm"]), ("run", "grace_seconds", "60"),
    ("run", "react_to_rebalance", "yes"), ("capacity", "instance_types", "c7i.xlarge"), ("capacity", "nodes", "2"),
    ("capacity", "nodes", 1.5), ("capacity", "max_price", True), ("capacity", "volume_size", "100"),
    ("network", "subnets", 5), ("access", "ssh_cidr", ["203.0.113.0/24"]), ("storage", "keep_checkpoints", "3"),
    ("notify", "stall_minutes", "30"), ("schedule", "deadline", date(2030, 12, 1)), ("schedule", "margin", 30),
    (None, "name", 5),
]


def wrong_type_cases() -> list[JobCase]:
    cases = []
    for section, key, value in WRONG_TYPES:
        field = f"{section}.{key}" if section else key
        cases.append(JobCase(f"{field} = {toml_value(value)} (wrong type)", field, changed(section, key, value)))
    return cases


def run_cases() -> list[JobCase]:
    heredoc = "\nSPOT_TRAINER_VALUE\ntouch /tmp/pwned"
    v1 = {"userdata_version": "v1"}
    long_setup = " && ".join(f"pip install package-number-{n}" for n in range(200))
    return [
        JobCase('command = "builtin "', "run.command", changed("run", "command", "builtin ")),
        JobCase('command = "builtin;"', "run.command", changed("run", "command", "builtin;")),
        JobCase('command = "Builtin"', "run.command", changed("run", "command", "Builtin")),
        JobCase("here-doc delimiter in command", "run.command", own_command(command="python t.py" + heredoc)),
        JobCase("here-doc delimiter in train_args", "run.train_args",
                changed("run", "train_args", EXAMPLE["run"]["train_args"] + heredoc)),
        JobCase("here-doc delimiter in setup", "run.setup", own_command(setup="pip install x" + heredoc)),
        JobCase("here-doc delimiter in setup, user data v1", "run.setup",
                {**own_command(setup="pip install x" + heredoc, trainer_package="spot-trainer==0.1.0"), **v1}),
        JobCase("train_args with an unbalanced quote", "run.train_args", changed("run", "train_args", "--model 'lm")),
        JobCase("train_args --steps abc", "run.train_args",
                changed("run", "train_args", "--model lm --synthetic --steps abc")),
        JobCase("train_args unknown flag --fast", "run.train_args",
                changed("run", "train_args", "--model lm --synthetic --steps 9 --fast")),
        JobCase("train_args --help", "run.train_args",
                changed("run", "train_args", "--model lm --synthetic --steps 9 --help")),
        JobCase("train_args --lr -1", "run.train_args",
                changed("run", "train_args", "--model lm --synthetic --steps 9 --lr -1")),
        JobCase("train_args --data s3://My_Bucket/x", "run.train_args",
                changed("run", "train_args", "--model lm --steps 9 --data s3://My_Bucket/x")),
        JobCase("train_args with an own command", "run.train_args", own_command(train_args="--lr 1")),
        JobCase("setup with an unbalanced quote", "run.setup", own_command(setup="pip install 'torch")),
        JobCase("user data over 16 KiB", "run.setup", own_command(setup=long_setup)),
        JobCase("workdir outside the job folder", "run.workdir", own_command(workdir="..")),
        JobCase("workdir missing", "run.workdir", own_command(workdir="no-such-dir")),
        JobCase("workdir an absolute path (/etc)", "run.workdir", own_command(workdir="/etc")),
        JobCase("trainer_package a local wheel", "run.trainer_package",
                changed("run", "trainer_package", "dist/spot_trainer-0.2.0-py3-none-any.whl")),
        JobCase("trainer_package with spaces", "run.trainer_package",
                changed("run", "trainer_package", "spot-trainer >= 0.2")),
        JobCase("data without s3://", "run.data", own_command(data="my-datasets/cifar10")),
        JobCase("stop_signal SIGKILL", "run.stop_signal", changed("run", "stop_signal", "SIGKILL")),
    ]


def capacity_cases() -> list[JobCase]:
    def cap(**values: Any) -> dict[str, Any]:
        return with_section("capacity", **values)

    def price(value: Any) -> JobCase:
        return JobCase(f"max_price {toml_value(value)}", "capacity.max_price", cap(max_price=value))

    def types(case: str, value: list[str]) -> JobCase:
        return JobCase(f"instance_types {case}", "capacity.instance_types", cap(instance_types=value))

    return [
        price(0), price(-1), price(float("inf")), price(1e20),
        price("cheap"), price("0.45 "), price("0,45"),
        types("unknown ('banana')", ["c7i.xlarge", "banana"]),
        types("mixed architectures", ["c7i.xlarge", "c7g.xlarge"]),
        types("duplicate", ["c7i.xlarge", "c7i.xlarge"]),
        types("41 types", [f"c7i.{n}xlarge" for n in range(2, 43)]),
        types("g5.nano", ["g5.nano"]),
        types("comma-joined in one string", ["c7i.xlarge,c6i.xlarge"]),
        JobCase("nodes 0", "capacity.nodes", cap(nodes=0)),
        JobCase("nodes 65", "capacity.nodes", cap(nodes=65)),
        JobCase("min_nodes > nodes", "capacity.min_nodes", cap(distributed=True, nodes=3, min_nodes=4)),
        JobCase("distributed with nodes 1", "capacity.distributed", cap(distributed=True, nodes=1)),
        JobCase('placement "Cluster"', "capacity.placement", cap(distributed=True, nodes=2, placement="Cluster")),
        JobCase("volume_size 4", "capacity.volume_size", cap(volume_size=4)),
        JobCase('ami "ubuntu"', "capacity.ami", cap(ami="ubuntu")),
        JobCase('root_device "sda1"', "capacity.root_device", cap(root_device="sda1")),
    ]


def network_and_access_cases() -> list[JobCase]:
    def net(**values: Any) -> dict[str, Any]:
        return changed(None, "network", values)

    def ssh(cidr: str, key: str = "my-key") -> dict[str, Any]:
        return changed(None, "access", {"ssh_cidr": cidr, "key_pair": key} if key else {"ssh_cidr": cidr})

    return [
        JobCase("vpc_id without subnets", "network.vpc_id", net(vpc_id="vpc-0abc1234")),
        JobCase("subnets without vpc_id", "network.vpc_id", net(subnets=["subnet-0a1b2c3d"])),
        JobCase("subnet subnet-1", "network.subnets", net(vpc_id="vpc-0abc1234", subnets=["subnet-1"])),
        JobCase('subnets "Create"', "network.subnets", net(subnets="Create")),
        JobCase("subnets an empty list", "network.subnets", net(subnets=[])),
        JobCase("subnets comma-joined string", "network.subnets", net(subnets="subnet-0a1b2c3d,subnet-0b2c3d4e")),
        JobCase("ssh_cidr 0.0.0.0/0", "access.ssh_cidr", ssh("0.0.0.0/0")),
        JobCase("ssh_cidr IPv6", "access.ssh_cidr", ssh("2001:db8::/32")),
        JobCase("ssh_cidr 999.999.999.999/32", "access.ssh_cidr", ssh("999.999.999.999/32")),
        JobCase("ssh_cidr host bits set (10.0.0.5/24)", "access.ssh_cidr", ssh("10.0.0.5/24")),
        JobCase("ssh_cidr without key_pair", "access.key_pair", ssh("203.0.113.0/24", key="")),
    ]


def storage_and_schedule_cases() -> list[JobCase]:
    def store(**values: Any) -> dict[str, Any]:
        return with_section("storage", **values)

    def bucket(name: str) -> JobCase:
        return JobCase(f"bucket {name!r}", "storage.bucket", store(bucket=name))

    def when(**values: Any) -> dict[str, Any]:
        return changed(None, "schedule", values)

    def notify(**values: Any) -> dict[str, Any]:
        return changed(None, "notify", values)

    return [
        *(bucket(n) for n in ("192.168.5.4", "my..bucket", "xn--b", "My_Bucket", "ab", "s3://my-bucket")),
        JobCase("log_retention_days 10", "storage.log_retention_days", store(log_retention_days=10)),
        JobCase("keep_checkpoints 0", "storage.keep_checkpoints", store(keep_checkpoints=0)),
        JobCase('deadline "tomorrow"', "schedule.deadline", when(deadline="tomorrow")),
        JobCase("deadline without Z", "schedule.deadline", when(deadline="2030-12-01T18:00:00")),
        JobCase("deadline in the past", "schedule.deadline", when(deadline="2020-01-01T00:00:00Z")),
        JobCase("deadline TOML local date-time", "schedule.deadline", when(deadline=datetime(2030, 12, 1, 18))),
        JobCase("total_steps 0", "schedule.total_steps", when(total_steps=0)),
        JobCase("total_steps differs from --steps", "schedule.total_steps", when(total_steps=41)),
        JobCase('margin ""', "schedule.margin", when(margin="")),
        JobCase('max_spot_wait "2 hours"', "schedule.max_spot_wait", when(max_spot_wait="2 hours")),
        JobCase('email "ml-team"', "notify.email", notify(email="ml-team")),
        JobCase("two e-mail addresses", "notify.email", notify(email="a@example.com, b@example.com")),
        JobCase("stall_minutes -1", "notify.stall_minutes", notify(stall_minutes=-1)),
    ]


def top_level_cases() -> list[JobCase]:
    return [
        JobCase("description over 1024 bytes", "description", changed(None, "description", "d" * 1100)),
        JobCase("name in the file differs from the file name", "name", changed(None, "name", "other-job")),
        JobCase('name "Bad_Name"', "name", changed(None, "name", "Bad_Name")),
        JobCase('userdata_version "v9"', "userdata_version", changed(None, "userdata_version", "v9")),
    ]


def job_cases() -> list[JobCase]:
    return (broken_file_cases() + key_cases() + wrong_type_cases() + run_cases() + capacity_cases()
            + network_and_access_cases() + storage_and_schedule_cases() + top_level_cases())


def job_probe(index: int, case: JobCase, root: Path) -> Probe:
    folder = root / "jobs" / f"{index:03d}"
    folder.mkdir(parents=True)
    for name in case.dirs:
        (folder / name).mkdir()
    for name in case.files:
        (folder / name).write_text("")
    path = folder / case.filename
    if isinstance(case.content, dict):
        path.write_text(toml_text(case.content))
    elif isinstance(case.content, str):
        path.write_text(case.content)
    elif isinstance(case.content, bytes):
        path.write_bytes(case.content)
    job = str(path) if case.context is None else case.context.format(dir=folder)
    env = {"PATH": "/usr/bin:/bin", "CDK_CONTEXT_JSON": json.dumps({"job": job}),
           "CDK_OUTDIR": str(folder / "out"), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    return Probe("jobs", case.case, [sys.executable, "app.py"], REPO, env, case.expect, judge_synth, timeout=120,
                 heavy=True)


# ---- area 2: console parameters ----------------------------------------------------------------------


@dataclass(frozen=True)
class ConsoleCase:
    case: str
    values: dict[str, str]
    job: str = "example"
    vpc_of: dict[str, str] | None = None


VPCS = {"subnet-a": "vpc-1", "subnet-b": "vpc-1", "subnet-c": "vpc-2"}
DEPLOY_DEFAULTS = {"VpcId": "vpc-1", "Subnets": "subnet-a,subnet-b"}


def one(name: str, value: str, job: str = "example") -> ConsoleCase:
    return ConsoleCase(f"{name}={value!r}" if len(value) < 60 else f"{name}=<{len(value)} chars>", {name: value}, job)


def console_cases() -> list[ConsoleCase]:
    return [
        one("SshCidr", "0.0.0.0/0"), one("SshCidr", "999.999.999.999/32"), one("SshCidr", "2001:db8::/32"),
        one("SshCidr", "203.0.113.0/24 "),
        ConsoleCase("SshCidr without KeyPair", {"SshCidr": "203.0.113.0/24", "KeyPair": ""}),
        ConsoleCase("SshCidr without KeyPair (cifar)", {"SshCidr": "203.0.113.0/24", "KeyPair": ""}, "cifar"),
        one("Nodes", "1.5"), one("Nodes", "-1"), one("Nodes", "65"),
        one("MinNodes", "0"),
        ConsoleCase("MinNodes above Nodes", {"Distributed": "true", "Nodes": "2", "MinNodes": "5"}),
        ConsoleCase("Distributed with Nodes 1", {"Distributed": "true", "Nodes": "1", "MinNodes": "1"}),
        one("KeepCheckpoints", "1.5"), one("VolumeSize", "8.5"),
        one("CheckpointVersionRetentionDays", "0"), one("LogRetentionDays", "10"),
        one("InstanceTypes", "c7i.xlarge,c6i.xlarge"), one("InstanceTypes", "c7i.xlarge, c6i.xlarge,m6i.xlarge"),
        one("InstanceTypes", "c7i.xlarge,c6i.xlarge,m6i.xlarge", "cifar"),
        one("InstanceTypes", "C7I.XLARGE,C6I.XLARGE,M6I.XLARGE"),
        one("InstanceTypes", "g5.nano,c6i.xlarge,m6i.xlarge"), one("InstanceTypes", "c7g.xlarge,c6i.xlarge,m6i.xlarge"),
        one("InstanceTypes", "c7i.xlarge,c7i.xlarge,c7i.xlarge"),
        one("TrainingCommand", ""), one("TrainingCommand", "builtin;"), one("TrainingCommand", "builtin "),
        one("TrainingCommand", "python a.py\nSPOT_TRAINER_VALUE\ntouch /x"),
        one("TrainArguments", "--lr 0.1 " * 200), one("TrainArguments", "--model lm --synthetic --steps abc"),
        one("TrainArguments", "--model 'lm"),
        one("SetupCommand", "pip install a && " * 100),
        one("TrainerPackage", ""), one("TrainerPackage", "/home/me/spot_trainer-0.2.0-py3-none-any.whl"),
        one("TrainerPackage", "./dist/spot_trainer.whl"),
        one("SpotMaxPrice", "0"), one("SpotMaxPrice", "1000"), one("SpotMaxPrice", "1e20"), one("SpotMaxPrice", "0,45"),
        one("ExistingBucket", "xn--x"), one("ExistingBucket", "192.168.5.4"), one("ExistingBucket", "s3://my-bucket"),
        one("Deadline", "tomorrow"), one("Deadline", "2030-12-01 18:00"), one("Deadline", "2020-01-01T00:00:00Z"),
        one("Deadline", "2030-02-30T00:00:00Z"),
        ConsoleCase("Subnets from another VPC", {"VpcId": "vpc-1", "Subnets": "subnet-a,subnet-c"}),
        one("NotifyEmail", "ml-team"), one("StallAlarmMinutes", "30m"),
        one("TotalSteps", "0"), one("TotalSteps", "1e6"), one("MaxSpotWait", "2 hours"), one("DeadlineMargin", ""),
        one("DataBucket", "s3://my-datasets"), one("WorkingDirectory", "work"),
        one("KeyPair", "my key; rm -rf /"),
    ]


def judge_console(template: dict[str, Any], case: ConsoleCase) -> tuple[str, str]:
    from tests.unit.test_console_parameters import accepted as console_accepts  # CloudFormation's checks
    from tests.unit.test_console_rules import refusals

    parameters = template["Parameters"]
    for name, value in case.values.items():
        parameter = parameters[name]
        if not console_accepts(parameter, value):
            description = parameter.get("ConstraintDescription", "")
            if description:
                return "clear", f"{name}: {description}"
            if "AllowedValues" in parameter:
                return "clear", f"{name}: a pick list in the console; CloudFormation names the allowed values"
            return "unclear", f"{name}: refused with no ConstraintDescription (the console only says it is invalid)"
    found = refusals(template, {**DEPLOY_DEFAULTS, **case.values}, {**VPCS, **(case.vpc_of or {})})
    if found:
        return ("clear", found[0]) if all(found) else ("unclear", "a Rule refuses it with no AssertDescription")
    if refused := refused_at_start(template, case.values):
        return "at_start", f"refused at the first start (FAILED, group to zero): {refused}"
    return "accepted", "the console takes it: " + ", ".join(f"{k}={v!r}"[:80] for k, v in case.values.items())


# Console parameters that reach the agent's settings unchanged (stacks/training_stack.py's header).
AGENT_SETTINGS = {"TrainingCommand": "SPOT_COMMAND", "TrainArguments": "SPOT_TRAIN_ARGS",
                  "Distributed": "SPOT_DISTRIBUTED", "MinNodes": "SPOT_MIN_NODES", "Nodes": "SPOT_MAX_NODES",
                  "Deadline": "SPOT_DEADLINE", "TotalSteps": "SPOT_TOTAL_STEPS",
                  "DeadlineMargin": "SPOT_DEADLINE_MARGIN", "KeepCheckpoints": "SPOT_KEEP_CHECKPOINTS"}


def refused_at_start(template: dict[str, Any], values: dict[str, str]) -> str | None:
    """What the agent's own checks say of the deployed values when its instance starts, or None."""
    from spot_trainer.agent.config import ConfigError, check_config, config_from_env

    typed = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()} | values
    env = {"SPOT_JOB": "example", "SPOT_BUCKET": "checkpoints-bucket", "SPOT_REGION": "us-east-1",
           **{setting: typed[name] for name, setting in AGENT_SETTINGS.items() if name in typed}}
    with tempfile.TemporaryDirectory() as directory:
        try:
            check_config(config_from_env({**env, "SPOT_CHECKPOINT_DIR": directory}))
        except ConfigError as error:
            return str(error)
    return None


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While synthesizing in-process, whatever the CDK (or its node process) prints goes to stderr: stdout
    carries the JSON alone."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def console_verdicts(root: Path) -> list[Verdict]:
    from tests.unit.stack_support import synth

    with stdout_to_stderr():
        templates = {job: synth(job, root / "console" / job).raw for job in ("example", "cifar")}
    verdicts = []
    for case in console_cases():
        outcome, output = judge_console(templates[case.job], case)
        verdicts.append(intended(Verdict("console", f"{case.job}: {case.case}", outcome, output[:300])))
    return verdicts


# ---- area 3: agent environment files -----------------------------------------------------------------


@dataclass(frozen=True)
class EnvCase:
    case: str
    expect: str  # the setting (or file problem) the first line must name
    values: dict[str, str]  # settings replaced or added, written KEY=VALUE with the value verbatim
    raw: bytes = b""  # bytes appended as they are
    env_file: str | None = None  # "{dir}"-relative path given to --env-file instead of the written file


def number_cases(name: str, *values: str) -> list[EnvCase]:
    return [EnvCase(f"{name}={value}", name, {name: value}) for value in values]


def env_cases() -> list[EnvCase]:
    builtin = {"SPOT_COMMAND": "builtin"}
    distributed = {"SPOT_DISTRIBUTED": "true", "SPOT_MAX_NODES": "3"}
    return [
        *number_cases("SPOT_GRACE_SECONDS", "ninety", "-5", "inf"),
        *number_cases("SPOT_RESTART_BUDGET", "-1", "2.5"),
        *number_cases("SPOT_KEEP_CHECKPOINTS", "three", "0"),
        *number_cases("SPOT_POLL_SECONDS", "0"),
        *number_cases("SPOT_LEASE_TTL_SECONDS", "0.3"),
        *number_cases("SPOT_STATUS_INTERVAL", "nan"),
        *number_cases("SPOT_TOTAL_STEPS", "abc", "-5"),
        EnvCase("SPOT_TOTAL_STEPS=0 with a deadline, own command", "SPOT_TOTAL_STEPS",
                {"SPOT_TOTAL_STEPS": "0", "SPOT_DEADLINE": "36h"}),
        EnvCase("SPOT_MIN_NODES=0 (distributed)", "SPOT_MIN_NODES", {**distributed, "SPOT_MIN_NODES": "0"}),
        EnvCase("SPOT_PROCS_PER_NODE=0", "SPOT_PROCS_PER_NODE", {"SPOT_PROCS_PER_NODE": "0"}),
        EnvCase("SPOT_DISTRIBUTED=maybe", "SPOT_DISTRIBUTED", {"SPOT_DISTRIBUTED": "maybe"}),
        EnvCase("SPOT_REACT_TO_REBALANCE=on", "SPOT_REACT_TO_REBALANCE", {"SPOT_REACT_TO_REBALANCE": "on"}),
        *(EnvCase(f"SPOT_STOP_SIGNAL={s}", "SPOT_STOP_SIGNAL", {"SPOT_STOP_SIGNAL": s})
          for s in ("SIGNOPE", "SIGKILL", "9")),
        EnvCase("SPOT_REGION=Mars", "SPOT_REGION", {"SPOT_REGION": "Mars"}),
        EnvCase("SPOT_REGION='us-east-1 ' (quoted space)", "SPOT_REGION", {"SPOT_REGION": "'us-east-1 '"}),
        EnvCase("SPOT_BUCKET=My_Bucket", "SPOT_BUCKET", {"SPOT_BUCKET": "My_Bucket"}),
        EnvCase("SPOT_BUCKET=s3://some-bucket", "SPOT_BUCKET", {"SPOT_BUCKET": "s3://some-bucket"}),
        EnvCase("SPOT_JOB empty", "SPOT_JOB", {"SPOT_JOB": ""}),
        EnvCase("SPOT_JOB='my job/../x'", "SPOT_JOB", {"SPOT_JOB": "'my job/../x'"}),
        EnvCase("SPOT_COMMAND=builtin;", "SPOT_COMMAND", {"SPOT_COMMAND": "builtin;"}),
        EnvCase("SPOT_COMMAND with an unbalanced quote", "SPOT_COMMAND",
                {"SPOT_COMMAND": "\"python train.py --name 'x\""}),
        EnvCase("SPOT_TRAIN_ARGS unparseable", "SPOT_TRAIN_ARGS", {**builtin, "SPOT_TRAIN_ARGS": "\"--model 'lm\""}),
        EnvCase("SPOT_TRAIN_ARGS --steps abc", "SPOT_TRAIN_ARGS",
                {**builtin, "SPOT_TRAIN_ARGS": "\"--model lm --synthetic --steps abc\""}),
        EnvCase("builtin without SPOT_TRAIN_ARGS", "SPOT_TRAIN_ARGS", builtin),
        EnvCase("SPOT_KEEP_CHECKPOINTS='3 (quote never closed)", "SPOT_KEEP_CHECKPOINTS",
                {"SPOT_KEEP_CHECKPOINTS": "'3"}),
        EnvCase("binary bytes in a value", "UTF-8", {}, raw=b"SPOT_REGION=\xff\xfe\n"),
        EnvCase("a line without '='", "SPOT_GRACE_SECONDS", {}, raw=b"SPOT_GRACE_SECONDS 60\n"),
        EnvCase("shell 'export' prefix", "SPOT_REGION", {}, raw=b"export SPOT_REGION=us-west-2\n"),
        EnvCase("misspelt setting SPOT_REGOIN", "SPOT_REGOIN", {"SPOT_REGOIN": "us-west-2"}),
        EnvCase("NUL byte in SPOT_COMMAND", "SPOT_COMMAND", {}, raw=b"SPOT_COMMAND=python\x00train.py\n"),
        EnvCase("SPOT_CHECKPOINT_DIR is a file", "SPOT_CHECKPOINT_DIR", {"SPOT_CHECKPOINT_DIR": "{dir}/a-file"}),
        EnvCase("SPOT_CHECKPOINT_DIR read-only (/proc)", "SPOT_CHECKPOINT_DIR",
                {"SPOT_CHECKPOINT_DIR": "/proc/hostile-inputs-ck"}),
        EnvCase("SPOT_WORKDIR missing", "SPOT_WORKDIR", {"SPOT_WORKDIR": "{dir}/no-such-dir"}),
        EnvCase("SPOT_DEADLINE=tomorrow", "SPOT_DEADLINE", {"SPOT_DEADLINE": "tomorrow"}),
        EnvCase("SPOT_DEADLINE_MARGIN=0m", "SPOT_DEADLINE_MARGIN", {"SPOT_DEADLINE_MARGIN": "0m"}),
        EnvCase("SPOT_NOTIFY_TOPIC not an ARN", "SPOT_NOTIFY_TOPIC", {"SPOT_NOTIFY_TOPIC": "my-topic"}),
        EnvCase("--env-file missing", "no-such.env", {}, env_file="{dir}/no-such.env"),
        EnvCase("--env-file is a folder", "{dir}", {}, env_file="{dir}"),
    ]


def env_file_bytes(case: EnvCase, folder: Path) -> bytes:
    settings = {"SPOT_JOB": "j", "SPOT_BUCKET": "some-bucket", "SPOT_COMMAND": "'python train.py'",
                "SPOT_CHECKPOINT_DIR": str(folder / "ck"), "SPOT_REGION": "us-east-1"}
    settings.update({k: v.format(dir=folder) for k, v in case.values.items()})
    return "".join(f"{k}={v}\n" for k, v in settings.items()).encode() + case.raw


def agent_probe(index: int, case: EnvCase, root: Path) -> Probe:
    folder = root / "agent" / f"{index:03d}"
    folder.mkdir(parents=True)
    (folder / "a-file").write_text("not a directory")
    path = folder / "agent.env"
    path.write_bytes(env_file_bytes(case, folder))
    env_file = str(path) if case.env_file is None else case.env_file.format(dir=folder)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), **AWS_OFFLINE}
    return Probe("agent", case.case, [sys.executable, "-m", "spot_trainer", "agent", "--env-file", env_file],
                 folder, env, case.expect.format(dir=folder), judge_agent)


# ---- area 4: command-line flags ----------------------------------------------------------------------

DEMO_STUB = """
import sys
sys.path.insert(0, sys.argv.pop(1))
import localcloud.__main__ as cli

class NoDemo(cli.LocalCloud):
    # The real synth runs first (it checks the job file); moto, the deploy and the instances do not.
    def __enter__(self):
        print("hostile-inputs: every check passed; a real demo would start moto here", file=sys.stderr)
        raise SystemExit(97)

def no_destroy():
    raise SystemExit(97)

cli.LocalCloud = NoDemo
cli.destroy = no_destroy
sys.exit(cli.main(sys.argv[1:]))
"""

TRAIN = ["train", "--model", "lm", "--synthetic", "--checkpoint-dir", "{dir}/ck"]


def cli_cases() -> list[tuple[str, str, list[str]]]:
    """(case, the flag the line must name, argv after `python -m`); "{dir}" is the case's folder."""
    status = ["spot_trainer", "status"]
    demo = ["localcloud", "demo"]
    return [
        ("status --bucket 'My Bucket'", "--bucket", [*status, "--job", "j", "--bucket", "My Bucket"]),
        ("status without --job", "--job", [*status, "--bucket", "some-bucket"]),
        ("status without --bucket", "--bucket", [*status, "--job", "j"]),
        ("status --bucket s3://some-bucket", "--bucket", [*status, "--job", "j", "--bucket", "s3://some-bucket"]),
        ("status --job ../x", "--job", [*status, "--job", "../x", "--bucket", "some-bucket"]),
        ("status --region Mars", "--region", [*status, "--job", "j", "--bucket", "some-bucket", "--region", "Mars"]),
        ("status --jb (typo)", "--job", [*status, "--jb", "j", "--bucket", "some-bucket"]),
        ("spot_trainer trian (typo)", "trian", ["spot_trainer", "trian"]),
        ("spot_trainer with no command", "agent,train,status", ["spot_trainer"]),
        ("train --steps abc", "--steps", ["spot_trainer", *TRAIN, "--steps", "abc"]),
        ("train --steps 0", "--steps", ["spot_trainer", *TRAIN, "--steps", "0"]),
        ("train --model nope", "--model", ["spot_trainer", "train", "--model", "nope", "--synthetic", "--steps", "2",
                                           "--checkpoint-dir", "{dir}/ck"]),
        ("train --checkpoint-dir a file", "--checkpoint-dir",
         ["spot_trainer", "train", "--model", "lm", "--synthetic", "--steps", "2", "--checkpoint-dir", "{dir}/a-file"]),
        ("train without --checkpoint-dir or $CHECKPOINT_DIR", "--checkpoint-dir",
         ["spot_trainer", "train", "--model", "lm", "--synthetic", "--steps", "2"]),
        ("train unknown flag --fast", "--fast", ["spot_trainer", *TRAIN, "--steps", "2", "--fast"]),
        ("train --lr -1", "--lr", ["spot_trainer", *TRAIN, "--steps", "2", "--lr", "-1"]),
        ("train --data missing folder", "--data", ["spot_trainer", "train", "--model", "lm", "--steps", "2",
                                                   "--data", "{dir}/no-such-data", "--checkpoint-dir", "{dir}/ck"]),
        ("agent --bogus", "--bogus", ["spot_trainer", "agent", "--bogus"]),
        ("demo --job nope", "nope", [*demo, "--job", "nope"]),
        ("demo --job a file with a bad field", "capacity.nodes", [*demo, "--job", "{dir}/badfield.toml"]),
        ("demo --job a Latin-1 file", "UTF-8", [*demo, "--job", "{dir}/latin.toml"]),
        ("demo --interruptions -1", "--interruptions", [*demo, "--interruptions", "-1"]),
        ("demo --spot-outage abc", "--spot-outage", [*demo, "--spot-outage", "abc"]),
        ("demo --price-trace missing file", "--price-trace", [*demo, "--price-trace", "{dir}/no-such-trace.json"]),
        ("demo --price-trace not JSON", "--price-trace", [*demo, "--price-trace", "{dir}/a-file"]),
        ("demo --rate -5", "--rate", [*demo, "--rate", "-5"]),
        ("demo --interruptions with --rate", "--rate", [*demo, "--interruptions", "2", "--rate", "3"]),
        ("demo --hard-kill 5", "--hard-kill", [*demo, "--hard-kill", "5"]),
        ("demo --spot-discount 1.5", "--spot-discount", [*demo, "--spot-discount", "1.5"]),
        ("demo --notice-seconds -1", "--notice-seconds", [*demo, "--notice-seconds", "-1"]),
        ("demo --timeout 0", "--timeout", [*demo, "--timeout", "0"]),
        ("demo --early-replacement -1", "--early-replacement", [*demo, "--early-replacement", "-1"]),
        ("demo --env FOO (no =)", "--env", [*demo, "--env", "FOO"]),
        ("demo --json into a missing folder", "--json", [*demo, "--json", "{dir}/no-such-dir/report.json"]),
        ("demo --train-args '--steps abc'", "--train-args", [*demo, "--train-args=--model lm --synthetic --steps abc"]),
        ("demo --seed x", "--seed", [*demo, "--seed", "x"]),
        ("localcloud dmeo (typo)", "dmeo", ["localcloud", "dmeo"]),
    ]


def cli_probe(index: int, case: tuple[str, str, list[str]], root: Path) -> Probe:
    name, expect, argv = case
    folder = root / "cli" / f"{index:03d}"
    folder.mkdir(parents=True)
    (folder / "a-file").write_text("not a directory, not JSON")
    (folder / "badfield.toml").write_text(toml_text(changed("capacity", "nodes", 0)))
    (folder / "latin.toml").write_bytes('description = "café"\n'.encode("latin-1"))
    args = [word.format(dir=folder) for word in argv]
    if args[0] == "localcloud":
        command = [sys.executable, "-c", DEMO_STUB, str(REPO), *args[1:]]
    else:
        command = [sys.executable, "-m", *args]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
           **AWS_OFFLINE}
    # `train` runs torch; a demo that passes its flag checks runs a real `cdk synth`.
    return Probe("cli", name, command, folder, env, expect, judge_cli, timeout=120,
                 heavy="train" in args[1:2] or args[0] == "localcloud")


# ---- the sweep -----------------------------------------------------------------------------------------


def probes(root: Path, areas: Sequence[str]) -> list[Probe]:
    found: list[Probe] = []
    if "jobs" in areas:
        found += [job_probe(i, case, root) for i, case in enumerate(job_cases())]
    if "agent" in areas:
        found += [agent_probe(i, case, root) for i, case in enumerate(env_cases())]
    if "cli" in areas:
        found += [cli_probe(i, case, root) for i, case in enumerate(cli_cases())]
    return found


def counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    tally = Counter(v.outcome for v in verdicts)
    return {"tried": len(verdicts), **{outcome: tally[outcome] for outcome in OUTCOMES}}


def summary(verdicts: Sequence[Verdict], seconds: float) -> dict[str, Any]:
    areas = sorted({v.area for v in verdicts}, key=["jobs", "console", "agent", "cli"].index)
    return {
        **counts(verdicts),
        "seconds": round(seconds, 1),
        "by_area": {area: counts([v for v in verdicts if v.area == area]) for area in areas},
        "not_clear": [{"area": v.area, "case": v.case, "outcome": v.outcome, "output": v.output}
                      for v in verdicts if v.outcome != "clear"],
    }


def sweep(areas: Sequence[str], workers: int) -> list[Verdict]:
    """CPU-bound commands one per core (more only thrash), the rest (mostly waiting on a closed port or
    a retry) eight at a time; the console is judged in this thread meanwhile."""
    with tempfile.TemporaryDirectory(prefix="hostile-inputs-") as directory:
        root = Path(directory)
        commands = probes(root, areas)
        with ThreadPoolExecutor(max_workers=workers) as heavy, ThreadPoolExecutor(max_workers=8) as light:
            running = [(heavy if probe.heavy else light).submit(verdict_of, probe) for probe in commands]
            console = console_verdicts(root) if "console" in areas else []
            ran = [future.result() for future in running]
    by_area: dict[str, list[Verdict]] = {"jobs": [], "console": console, "agent": [], "cli": []}
    for verdict in ran:
        by_area[verdict.area].append(verdict)
    return [v for area in ("jobs", "console", "agent", "cli") for v in by_area[area]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="CPU-bound commands (synths, the trainer) run at once (default: one per core)")
    parser.add_argument("--areas", nargs="+", default=["jobs", "console", "agent", "cli"],
                        choices=["jobs", "console", "agent", "cli"])
    options = parser.parse_args()
    started = time.monotonic()
    verdicts = sweep(options.areas, options.workers)
    print(json.dumps(summary(verdicts, time.monotonic() - started), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
