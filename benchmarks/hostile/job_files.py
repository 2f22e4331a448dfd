"""Area 1: job files through the real synth (`python app.py` with CDK_CONTEXT_JSON)."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from hostile.judging import EXAMPLE, REPO, Probe, judge_synth


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
        JobCase("checkpoint_dir climbing out (../ckpt)", "run.checkpoint_dir", own_command(checkpoint_dir="../ckpt")),
        JobCase("checkpoint_dir with a space", "run.checkpoint_dir", own_command(checkpoint_dir="my outputs")),
        JobCase("checkpoint_dir with a command ($(reboot))", "run.checkpoint_dir",
                own_command(checkpoint_dir="$(reboot)")),
        JobCase("checkpoint_dir the working directory (.)", "run.checkpoint_dir", own_command(checkpoint_dir=".")),
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
