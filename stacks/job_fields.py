"""Field-by-field reading of a job file: unknown keys, types, then the meaning of each value."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import shlex
import time
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from stacks.instance_types import architecture, instance_type_problem
from stacks.job_spec import (
    AMI_ID,
    BUCKET_NAME,
    CURRENT_USERDATA_VERSION,
    DEFAULT_TRAINER_PACKAGE,
    JOB_NAME,
    LOG_RETENTION_DAYS,
    MAX_KEEP_CHECKPOINTS,
    MAX_NODES,
    MAX_STALL_MINUTES,
    PLACEMENTS,
    SIGNALS,
    SSM_PATH,
    AccessSpec,
    CapacitySpec,
    JobSpec,
    JobSpecError,
    NetworkSpec,
    NotifySpec,
    RunSpec,
    ScheduleSpec,
    StorageSpec,
    data_location,
)
from stacks.user_data import available_versions
from trainer.builtin.arguments import ArgumentsError, check_arguments
from trainer.capacity.policy import parse_deadline, parse_duration
from trainer.storage.names import bucket_name_problem

SECTIONS: dict[str, type] = {
    "run": RunSpec,
    "capacity": CapacitySpec,
    "network": NetworkSpec,
    "access": AccessSpec,
    "storage": StorageSpec,
    "notify": NotifySpec,
    "schedule": ScheduleSpec,
}
TOP_LEVEL = {"name", "description", "userdata_version", *SECTIONS}
TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", tuple: "a list of strings"}


def _fail(field: str, message: str) -> JobSpecError:
    return JobSpecError(f"{field}: {message}")


def _check_type(field: str, value: Any, expected: type) -> Any:
    if expected is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _fail(field, f"expected {TYPE_NAMES[tuple]}, got {value!r}")
        return tuple(value)
    # bool is an int in Python; a job file that says `nodes = true` is still wrong.
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise _fail(field, f"expected {TYPE_NAMES[expected]}, got {value!r}")
    return value


def _read_section(name: str, raw: Any, cls: type) -> Any:
    if not isinstance(raw, dict):
        raise _fail(name, f"expected a [{name}] table")
    defaults = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in defaults:
            raise _fail(f"{name}.{key}", f"unknown key (known: {', '.join(defaults)})")
        if key == "max_price" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = _fixed_point(value)
        if key == "deadline" and isinstance(value, datetime):
            value = _utc_text(value)
        if key == "subnets" and value in ("create", "parameter"):
            values["create"] = value == "create"  # "parameter": VPC and subnets chosen at deploy time
            continue
        if key == "subnets" and isinstance(value, str):
            raise _fail("network.subnets", f'expected "create", "parameter" or a list of subnet-… ids, got {value!r}')
        expected = type(defaults[key].default)
        values[key] = _check_type(f"{name}.{key}", value, expected)
    return cls(**values)


def _check_run(run: RunSpec, source: Path) -> None:
    if not run.command.strip():
        raise _fail("run.command", 'missing: give "builtin" or the command that trains')
    if run.command != run.command.strip():
        raise _fail("run.command", f"{run.command!r} has leading or trailing spaces")
    for field, text in (("run.command", run.command), ("run.train_args", run.train_args),
                        ("run.trainer_package", run.trainer_package)):
        if "\n" in text or "\r" in text:
            raise _fail(field, "must be one line (the agent reads it from a one-line setting)")
        if any(ord(char) < 32 and char != "\t" or ord(char) == 127 for char in text):
            raise _fail(field, f"holds a control character: {text!r}")
        try:
            shlex.split(text)
        except ValueError as error:
            raise _fail(field, f"cannot be parsed as shell words ({error}): {text!r}") from None
    if run.command != "builtin" and run.command.split(maxsplit=1)[0].rstrip(";&|") == "builtin":
        # `bash -c "builtin; …"` exits 0 at once and the job would end DONE after zero steps.
        raise _fail("run.command", f'{run.command!r}: the built-in trainer is exactly "builtin", with its '
                    "arguments in run.train_args")
    try:  # the setup command runs under bash at every boot: an unbalanced quote would fail each one
        shlex.split(run.setup)
    except ValueError as error:
        raise _fail("run.setup", f"cannot be parsed as shell words ({error}): {run.setup!r}") from None
    if run.train_args and run.command != "builtin":
        raise _fail("run.train_args", 'only applies when run.command = "builtin"')
    if run.command == "builtin":
        _check_builtin_arguments(run.train_args)
    if run.stop_signal not in SIGNALS:
        raise _fail("run.stop_signal", f"expected one of {', '.join(SIGNALS)}, got {run.stop_signal!r}")
    if not 10 <= run.grace_seconds <= 7200:
        raise _fail("run.grace_seconds", f"expected 10..7200 seconds, got {run.grace_seconds}")
    if run.restart_budget < 0:
        raise _fail("run.restart_budget", f"expected 0 or more, got {run.restart_budget}")
    if problem := trainer_package_problem(run.trainer_package):
        raise _fail("run.trainer_package", problem)
    if run.data and not (run.data.startswith("s3://") and BUCKET_NAME.match(run.data[5:].partition("/")[0])):
        raise _fail("run.data", f"expected s3://bucket/prefix, got {run.data!r}")
    _check_dataset(run)
    if run.workdir and not (source.parent / run.workdir).is_dir():
        raise _fail("run.workdir", f"{run.workdir!r} is not a directory next to the job file")
    if run.workdir and not (source.parent / run.workdir).resolve().is_relative_to(source.parent.resolve()):
        raise _fail("run.workdir", f"{run.workdir!r} lies outside the job file's folder; everything in it "
                    "would be shipped")


def _check_builtin_arguments(train_args: str) -> None:
    """The trainer's own parser, run before deploying: arguments it refuses would fail every boot."""
    if not train_args.strip():
        raise _fail("run.train_args", "the built-in trainer needs --model, --steps and --data or --synthetic, "
                    'e.g. "--model resnet --steps 20000 --data s3://bucket/cifar10"')
    words = shlex.split(train_args)
    try:
        check_arguments(words)
    except ArgumentsError as error:
        raise _fail("run.train_args", f"{error} (in {train_args!r})") from None
    if any(word.split("=", 1)[0] == "--checkpoint-dir" for word in words):
        raise _fail("run.train_args", "leave out --checkpoint-dir: the agent restores into $CHECKPOINT_DIR and "
                    "uploads only what the trainer saves there")


def _check_dataset(run: RunSpec) -> None:
    """The dataset read access is granted for must pass the DataBucket/DataPrefix parameters' own rules,
    and be the one the built-in trainer reads."""
    field = "run.data" if run.data else "run.train_args"
    location = data_location(run)
    if location is not None:
        bucket, prefix = location
        if problem := bucket_name_problem(bucket):
            raise _fail(field, f"dataset {problem}")
        if not DATA_PREFIX.match(prefix):
            raise _fail(field, f"dataset key prefix {prefix!r} has spaces, which the DataPrefix parameter refuses")
    if run.data and run.command == "builtin":
        flagged = data_location(dataclasses.replace(run, data=""))
        if flagged is not None and flagged != location:
            raise _fail("run.data", f"names s3://{'/'.join(filter(None, location or ()))} but the built-in "
                        f"trainer reads --data s3://{'/'.join(filter(None, flagged))}: read access would be "
                        "granted to the wrong one")


def trainer_package_problem(spec: str) -> str | None:
    """Why user data could not pip-install `spec` on an instance (it passes it to pip as one word), or None."""
    if not spec.strip():
        return "missing: an s3://bucket/key.whl URI or a pip requirement like spot-trainer==0.2.0"
    if any(char.isspace() for char in spec):
        return f"{spec!r} holds spaces: write a pip requirement without them, e.g. spot-trainer>=0.2"
    if spec.startswith("s3://"):
        bucket, _, key = spec[5:].partition("/")
        if bucket_name_problem(bucket) or not key.endswith(".whl") or key == ".whl":
            return f"{spec!r}: an s3:// package is the wheel itself, s3://bucket/key.whl"
        return None
    if "://" in spec:  # https://…/x.whl, git+https://…: pip fetches them
        return None
    if spec.startswith(("/", ".", "~", "-")) or "/" in spec or "\\" in spec or spec.endswith(LOCAL_ARCHIVES):
        return (f"{spec!r} is a path on this machine (or a pip option), which an instance cannot read: publish "
                "the wheel to S3 (s3://bucket/key.whl) or give a pip requirement like spot-trainer==0.2.0")
    if not PIP_REQUIREMENT.match(spec):
        return f"{spec!r} is not a pip requirement like spot-trainer==0.2.0"
    return None


def _fixed_point(price: float) -> str:
    """1e-05 → '0.00001': the SpotMaxPrice parameter (and EC2) take plain decimals only."""
    if not 0 < price <= MAX_PRICE_USD:  # out of range (or nan): refused below, in the user's own spelling
        return str(price)
    return f"{price:.6f}".rstrip("0").rstrip(".")


def _check_capacity(cap: CapacitySpec) -> None:
    if problem := check_instance_types(list(cap.instance_types)):
        raise _fail("capacity.instance_types", problem)
    if not 1 <= cap.nodes <= MAX_NODES:
        raise _fail("capacity.nodes", f"expected 1 to {MAX_NODES}, got {cap.nodes}")
    if cap.max_price:
        try:
            price = float(cap.max_price)
        except ValueError:
            raise _fail("capacity.max_price", f"expected USD per hour like 0.45, got {cap.max_price!r}") from None
        if not price > 0:
            raise _fail("capacity.max_price", f"expected a positive price, got {cap.max_price!r}")
        if not price < MAX_PRICE_USD:  # also catches inf and nan
            raise _fail("capacity.max_price", f"{cap.max_price!r} USD/hour is beyond any instance's price "
                        f"(below {MAX_PRICE_USD:g}); leave it out for the on-demand cap")
        if not PLAIN_DECIMAL.match(cap.max_price):  # "0.45 ", "1_000": float() reads them, the template does not
            raise _fail("capacity.max_price", f"expected a plain decimal like 0.45, got {cap.max_price!r}")
    if not ROOT_DEVICE.match(cap.root_device):
        raise _fail("capacity.root_device",
                    f"expected a device name like /dev/sda1 or /dev/xvda, got {cap.root_device!r}")
    if not (SSM_PATH.match(cap.ami) or AMI_ID.match(cap.ami)):
        raise _fail("capacity.ami", f"expected an SSM parameter path or ami-… id, got {cap.ami!r}")
    if problem := check_image_architecture(cap.ami, cap.instance_types):
        raise _fail("capacity.ami", problem)
    if not 8 <= cap.volume_size <= 16384:
        raise _fail("capacity.volume_size", f"expected 8..16384 GiB, got {cap.volume_size}")


def _check_distributed(cap: CapacitySpec, given: Collection[str]) -> CapacitySpec:
    """Multi-node fields; returns the spec with min_nodes filled in (default: every node)."""
    if cap.distributed and cap.nodes < 2:
        raise _fail("capacity.distributed", f"a distributed job needs at least 2 nodes, capacity.nodes is {cap.nodes}")
    if "min_nodes" in given and not cap.distributed:
        raise _fail("capacity.min_nodes", "only applies when capacity.distributed = true (otherwise one node "
                    "trains and the others stand by)")
    if "min_nodes" in given and not 1 <= cap.min_nodes <= cap.nodes:
        raise _fail("capacity.min_nodes", f"expected 1 to capacity.nodes ({cap.nodes}), got {cap.min_nodes}")
    if cap.placement not in PLACEMENTS:
        raise _fail("capacity.placement", f'expected "cluster" or "", got {cap.placement!r}')
    if cap.placement and not cap.distributed:
        raise _fail("capacity.placement", "only applies when capacity.distributed = true: a standby gains "
                    "nothing from sitting next to the node that trains")
    return dataclasses.replace(cap, min_nodes=cap.min_nodes if "min_nodes" in given else cap.nodes)


def _check_cluster_network(cap: CapacitySpec, net: NetworkSpec) -> None:
    """A cluster placement group lives in one AZ; listed subnets' AZs are unknown at synth, so one subnet."""
    if cap.placement == "cluster" and len(net.subnets) > 1:
        raise _fail("capacity.placement", f'"cluster" keeps every node in one AZ: network.subnets must list '
                    f"exactly one subnet, got {len(net.subnets)}")


def _check_network(net: NetworkSpec) -> NetworkSpec:
    if net.subnets:
        bad = next((s for s in net.subnets if not SUBNET_ID.match(s)), None)
        if bad:
            raise _fail("network.subnets", f'expected subnet-… ids (8 or 17 hex digits), "create" or "parameter", '
                        f"got {bad!r}")
        if not net.vpc_id:
            raise _fail("network.vpc_id", "required (vpc-…) when network.subnets lists subnets")
        if len(set(net.subnets)) != len(net.subnets):
            raise _fail("network.subnets", "lists a subnet twice")
    if net.vpc_id and not VPC_ID.match(net.vpc_id):
        raise _fail("network.vpc_id", f"expected a VPC id like vpc-0123456789abcdef0, got {net.vpc_id!r}")
    if net.subnets:
        return dataclasses.replace(net, create=False)
    if net.vpc_id and net.create:
        raise _fail("network.vpc_id", 'only used with network.subnets (a list, or "parameter"); with the '
                    'default "create" the stack makes its own VPC')
    return net


def _check_access(access: AccessSpec) -> None:
    if access.ssh_cidr and (problem := check_cidr(access.ssh_cidr)):
        raise _fail("access.ssh_cidr", problem)
    if ":" in access.ssh_cidr:
        raise _fail("access.ssh_cidr", f"{access.ssh_cidr!r} is IPv6; the SSH rule takes an IPv4 range like "
                    "203.0.113.0/24 (or use Session Manager)")
    if access.ssh_cidr in ("0.0.0.0/0", "::/0"):
        raise _fail("access.ssh_cidr", "refusing SSH from the whole internet; give your own range")
    if access.ssh_cidr and not access.key_pair:
        raise _fail("access.key_pair", "required when access.ssh_cidr opens SSH")


def _check_storage(storage: StorageSpec) -> None:
    if storage.bucket and (problem := bucket_name_problem(storage.bucket)):
        raise _fail("storage.bucket", problem)
    if not 1 <= storage.keep_checkpoints <= MAX_KEEP_CHECKPOINTS:
        raise _fail("storage.keep_checkpoints",
                    f"expected 1 to {MAX_KEEP_CHECKPOINTS}, got {storage.keep_checkpoints}")
    if storage.noncurrent_days < 1:
        raise _fail("storage.noncurrent_days", f"expected 1 or more days, got {storage.noncurrent_days}")
    if storage.log_retention_days not in LOG_RETENTION_DAYS:
        raise _fail("storage.log_retention_days", f"expected one of CloudWatch's values "
                    f"({', '.join(map(str, LOG_RETENTION_DAYS[:8]))}, …), got {storage.log_retention_days}")


def _utc_text(moment: datetime) -> str:
    """A TOML date-time (`deadline = 2026-12-01T18:00:00Z`, unquoted) in the one form the agent reads."""
    if moment.utcoffset() is None or moment.utcoffset() != UTC.utcoffset(None):
        raise _fail("schedule.deadline", f"{moment.isoformat()} is not in UTC: end it in Z, like 2026-12-01T18:00:00Z")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_notify(notify: NotifySpec) -> None:
    if notify.email and not EMAIL.match(notify.email):
        raise _fail("notify.email", f"expected an e-mail address like ml-team@example.com, got {notify.email!r}")
    if not 0 <= notify.stall_minutes <= MAX_STALL_MINUTES:
        raise _fail("notify.stall_minutes", f"expected 0 (no stall alarm) to {MAX_STALL_MINUTES} minutes, "
                    f"got {notify.stall_minutes}")


def _check_schedule(schedule: ScheduleSpec, run: RunSpec, given: Collection[str]) -> None:
    """The forms the agent and the capacity watch read (trainer/capacity/policy.py), checked here first."""
    for field, text in (("deadline", schedule.deadline), ("max_spot_wait", schedule.max_spot_wait),
                        ("margin", schedule.margin)):
        if text != text.strip():
            raise _fail(f"schedule.{field}", f"{text!r} has leading or trailing spaces")
        if not text and field != "margin":
            continue
        try:
            at = parse_deadline(text, first_start=time.time()) if field == "deadline" else parse_duration(text)
        except ValueError as error:
            raise _fail(f"schedule.{field}", str(error)) from None
        if field == "deadline" and not DURATION.match(text) and at <= time.time():
            raise _fail("schedule.deadline", f"{text} has already passed")
    if "total_steps" in given and schedule.total_steps < 1:
        raise _fail("schedule.total_steps", f"expected a positive number of steps, got {schedule.total_steps}")
    steps = _builtin_steps(run)
    if "total_steps" in given and run.command == "builtin" and steps != schedule.total_steps:
        raise _fail("schedule.total_steps", f"{schedule.total_steps} differs from the built-in trainer's --steps "
                    f"{steps}: leave it out (the built-in trainer's own count is used)")


def _builtin_steps(run: RunSpec) -> int | None:
    """The built-in trainer's --steps (_check_run has run its parser over the arguments)."""
    return int(check_arguments(shlex.split(run.train_args)).steps) if run.command == "builtin" else None


def build_job(data: dict[str, Any], source: Path) -> JobSpec:
    unknown = sorted(set(data) - TOP_LEVEL)
    if unknown:
        raise _fail(unknown[0], f"unknown key (known: {', '.join(sorted(TOP_LEVEL))})")
    name = _check_type("name", data.get("name", source.stem), str)
    if not JOB_NAME.match(name):
        raise _fail("name", f"{name!r} must be 2-32 lowercase letters, digits or '-', starting with a letter")
    sections = {key: _read_section(key, data.get(key, {}), cls) for key, cls in SECTIONS.items()}
    _check_run(sections["run"], source)
    _check_capacity(sections["capacity"])
    sections["capacity"] = _check_distributed(sections["capacity"], given=data.get("capacity", {}))
    sections["network"] = _check_network(sections["network"])
    _check_cluster_network(sections["capacity"], sections["network"])
    _check_access(sections["access"])
    _check_storage(sections["storage"])
    _check_notify(sections["notify"])
    _check_schedule(sections["schedule"], sections["run"], given=data.get("schedule", {}))
    version = _check_type("userdata_version", data.get("userdata_version", CURRENT_USERDATA_VERSION), str)
    if version not in available_versions():
        raise _fail("userdata_version", f"{version!r} not found (available: {', '.join(available_versions())})")
    if version == "v1" and sections["run"].trainer_package == DEFAULT_TRAINER_PACKAGE:
        raise _fail("userdata_version", "v1 starts the runtime as `trainer`, which spot-trainer 0.2 installs as "
                    f"`spot_trainer`: use {CURRENT_USERDATA_VERSION}, or pin run.trainer_package to 0.1.0")
    if version == "v1" and sections["capacity"].distributed:
        raise _fail("capacity.distributed", "user data v1 and spot-trainer 0.1 have no multi-node training: "
                    f"use {CURRENT_USERDATA_VERSION}")
    description = _check_type("description", data.get("description", ""), str)
    # The template's Description is "Spot Trainer job NAME: " + this; the limit applies to the whole.
    whole = len(f"Spot Trainer job {name}: {description}".encode())
    if whole > MAX_DESCRIPTION_BYTES:
        raise _fail("description", f"{len(description.encode())} bytes; with the stack's own prefix the "
                    f"template's description would be {whole}, and CloudFormation takes at most "
                    f"{MAX_DESCRIPTION_BYTES}")
    return JobSpec(
        name=name,
        source=source,
        description=description,
        userdata_version=version,
        **sections,
    )


MAX_DESCRIPTION_BYTES = 1024  # a template's Description
LOCAL_ARCHIVES = (".whl", ".tar.gz", ".zip")
# A name, optional [extras] and optional comma-separated version clauses (PEP 508, no markers or spaces).
PIP_REQUIREMENT = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,-]+\])?"
                             r"((~=|===?|!=|<=?|>=?)[A-Za-z0-9.*+!_-]+(,(~=|===?|!=|<=?|>=?)[A-Za-z0-9.*+!_-]+)*)?$")
ROOT_DEVICE = re.compile(r"^/dev/[a-z0-9]+$")
VPC_ID = re.compile(r"^vpc-([0-9a-f]{8}|[0-9a-f]{17})$")  # EC2's id forms, as CloudFormation checks them
SUBNET_ID = re.compile(r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")
PLAIN_DECIMAL = re.compile(r"^[0-9]*\.?[0-9]+$")  # the SpotMaxPrice parameter's own pattern, less the empty value
DATA_PREFIX = re.compile(r"^[^\s]*$")  # the DataPrefix parameter takes no spaces
EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")  # NotifyEmail's own
DURATION = re.compile(r"^([0-9]+[dhms])+$")
MAX_INSTANCE_TYPES = 40  # overrides of one mixed instances policy
MAX_PRICE_USD = 1000.0  # per instance-hour: far above any on-demand price, so a typo is caught


def check_cidr(value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return f"{value!r} is not a CIDR block like 203.0.113.0/24"
    return None


def check_instance_types(types: list[str]) -> str | None:
    if not types:
        return "needs at least one instance type"
    if len(types) > MAX_INSTANCE_TYPES:
        return f"lists {len(types)} types; a mixed instances policy takes at most {MAX_INSTANCE_TYPES}"
    if len(set(types)) != len(types):
        return "lists an instance type twice"
    if problem := next((p for p in map(instance_type_problem, types) if p), None):
        return problem
    first: dict[str, str] = {}
    for name in types:
        first.setdefault(architecture(name), name)
    if len(first) > 1:
        return (f"mixes x86_64 ({first['x86_64']}) and arm64 ({first['arm64']}) types: one image cannot boot "
                "both, so list types of one architecture")
    return None


def check_image_architecture(ami: str, types: tuple[str, ...]) -> str | None:
    """An SSM image path that names an architecture must match the instance types'."""
    wanted = architecture(types[0])
    other = "x86_64" if wanted == "arm64" else "arm64"
    if f"/{other}/" in ami or f"-{other}" in ami:
        return f"{ami!r} is an {other} image but the instance types are {wanted}"
    return None
