"""Field-by-field reading of a job file: unknown keys, types, then the meaning of each value.

Long because each section's checks stand together in the order a job file reads; what a check needs
of its own (the schedule, the checkpoint folder, the builtin's arguments) lives in its own module."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import shlex
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any

from spot_trainer.aws_names import JOB_NAME, JOB_NAME_RULE, bucket_name_problem
from spot_trainer.builtin_arguments import arguments_problem
from spot_trainer.command_text import has_control_character, shadows_builtin
from spot_trainer.secret_refs import SecretRefError, parse_refs
from spot_trainer.settings import LOG_RETENTION_DAYS, MAX_KEEP_CHECKPOINTS, MAX_NODES, SETTINGS, setting
from spot_trainer.signals import STOP_SIGNALS, builtin_stop_problem
from stacks.job.checkpoint_dir_field import check_checkpoint_dir, check_checkpoint_files
from stacks.job.instance_types import check_image_architecture, check_instance_types
from stacks.job.key_hints import unknown_key_message
from stacks.job.launcher_command import own_launcher
from stacks.job.regions_field import check_regions, check_regions_fit
from stacks.job.schedule_fields import check_notify, check_schedule, utc_text
from stacks.job.spec import (
    AMI_ID,
    CURRENT_USERDATA_VERSION,
    PLACEMENTS,
    SHIPPED_TRAINER_PACKAGE,
    SSM_PATH,
    AccessSpec,
    CapacitySpec,
    JobSpec,
    NetworkSpec,
    NotifySpec,
    RunSpec,
    ScheduleSpec,
    StorageSpec,
    data_location,
    field_error,
    plain_decimal,
)
from stacks.job.workdir_field import check_workdir

SECTIONS: dict[str, type] = {
    "run": RunSpec,
    "capacity": CapacitySpec,
    "network": NetworkSpec,
    "access": AccessSpec,
    "storage": StorageSpec,
    "notify": NotifySpec,
    "schedule": ScheduleSpec,
}
TOP_LEVEL = {*(s.field for s in SETTINGS if s.field and not s.section), *SECTIONS}
# Every place of the job file ("" = the top level) and its keys, for "it belongs in [schedule]".
KEYS_BY_PLACE: dict[str, list[str]] = {
    "": sorted(TOP_LEVEL), **{name: [f.name for f in dataclasses.fields(cls)] for name, cls in SECTIONS.items()}}
# torch, then one or more PEP 440 version clauses: what pip takes and user data compares with the image's.
TORCH_REQUIREMENT = re.compile(r"^torch(?:(?:==|>=|<=|~=|!=|<|>)[0-9][0-9A-Za-z.+*]*)(?:,(?:==|>=|<=|~=|!=|<|>)"
                               r"[0-9][0-9A-Za-z.+*]*)*$")
TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
              tuple: "a list of strings"}


def _check_type(field: str, value: Any, expected: type) -> Any:
    if expected is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise field_error(field, f"expected {TYPE_NAMES[tuple]}, got {value!r}")
        return tuple(value)
    # bool is an int in Python; a job file that says `nodes = true` is still wrong.
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise field_error(field, f"expected {TYPE_NAMES[expected]}, got {value!r}")
    return value


def _read_section(name: str, raw: Any, cls: type) -> Any:
    if not isinstance(raw, dict):
        raise field_error(name, f"expected a [{name}] table")
    defaults = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in defaults:
            raise field_error(f"{name}.{key}", unknown_key_message(name, key, list(defaults), KEYS_BY_PLACE))
        if key == "max_price" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = _fixed_point(value)
        if key == "budget_usd" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # `budget_usd = 50`
        if key == "deadline" and isinstance(value, datetime):
            value = utc_text(value)
        if key == "subnets" and value in ("create", "parameter"):
            values["create"] = value == "create"  # "parameter": VPC and subnets chosen at deploy time
            continue
        if key == "subnets" and value == []:  # else the default, a VPC of the stack's own, would stand silently
            raise field_error("network.subnets", 'an empty list: give subnet-… ids, "create" or "parameter"')
        if key == "subnets" and isinstance(value, str):
            raise field_error("network.subnets",
                              f'expected "create", "parameter" or a list of subnet-… ids, got {value!r}')
        expected = type(defaults[key].default)
        values[key] = _check_type(f"{name}.{key}", value, expected)
    return cls(**values)


def _check_run(run: RunSpec, source: Path) -> None:
    if not run.command.strip():
        raise field_error("run.command", 'missing: give "builtin" or the command that trains')
    if run.command != run.command.strip():
        raise field_error("run.command", f"{run.command!r} has leading or trailing spaces")
    for field, text in (("run.command", run.command), ("run.train_args", run.train_args),
                        ("run.trainer_package", run.trainer_package)):
        if "\n" in text or "\r" in text:
            raise field_error(field, "must be one line (the agent reads it from a one-line setting)")
        if has_control_character(text):
            raise field_error(field, f"holds a control character: {text!r}")
        try:
            shlex.split(text)
        except ValueError as error:
            raise field_error(field, f"cannot be parsed as shell words ({error}): {text!r}") from None
    if shadows_builtin(run.command):
        # `bash -c "builtin; …"` exits 0 at once and the job would end DONE after zero steps.
        raise field_error("run.command", f'{run.command!r}: the built-in trainer is exactly "builtin", with its '
                    "arguments in run.train_args")
    try:  # the setup command runs under bash at every boot: an unbalanced quote would fail each one
        shlex.split(run.setup)
    except ValueError as error:
        raise field_error("run.setup", f"cannot be parsed as shell words ({error}): {run.setup!r}") from None
    if run.train_args and not run.program.builtin:
        raise field_error("run.train_args", 'only applies when run.command = "builtin"')
    if run.program.builtin:
        _check_builtin_arguments(run.train_args)
    if run.stop_signal not in STOP_SIGNALS:
        raise field_error("run.stop_signal", f"expected one of {', '.join(STOP_SIGNALS)}, got {run.stop_signal!r}")
    if run.program.builtin and (stop_problem := builtin_stop_problem(run.stop_signal)):
        raise field_error("run.stop_signal", stop_problem)
    for field, value in (("run.grace_seconds", run.grace_seconds), ("run.save_warn_seconds", run.save_warn_seconds)):
        if (problem := _out_of_bounds(field, value)) is not None:
            raise field_error(field, f"expected {problem} seconds, got {value}")
    if run.restart_budget < 0:
        raise field_error("run.restart_budget", f"expected 0 or more, got {run.restart_budget}")
    if problem := trainer_package_problem(run.trainer_package):
        raise field_error("run.trainer_package", problem)
    if run.torch and not TORCH_REQUIREMENT.match(run.torch):
        raise field_error("run.torch", f"expected a torch requirement without spaces, e.g. torch==2.13.0 or "
                          f"torch>=2.5,<3, got {run.torch!r}")
    if run.data and not run.data.startswith("s3://"):
        raise field_error("run.data", f"expected s3://bucket/prefix, got {run.data!r}")
    _check_dataset(run)  # its bucket: S3's own rule (aws_names.py), as for every bucket name
    check_checkpoint_dir(run)
    check_checkpoint_files(run.checkpoint_files)
    try:
        parse_refs(run.secrets)
    except SecretRefError as error:
        raise field_error("run.secrets", str(error)) from None
    check_workdir(run.workdir, source)


def _out_of_bounds(field: str, value: float) -> str | None:
    """The field's range in the settings table ("10..7200") when `value` lies outside it, else None."""
    bounds = setting(field).bounds
    if bounds is None or bounds[0] <= value <= bounds[1]:
        return None
    return "{}..{}".format(*bounds)


def _check_builtin_arguments(train_args: str) -> None:
    """The trainer's own parser, run before deploying: arguments it refuses would fail every boot."""
    if problem := arguments_problem(train_args):
        raise field_error("run.train_args", problem)


def _check_dataset(run: RunSpec) -> None:
    """The dataset read access is granted for must pass the DataBucket/DataPrefix parameters' own rules,
    and be the one the built-in trainer reads."""
    field = "run.data" if run.data else "run.train_args"
    location = data_location(run)
    if location is not None:
        bucket, prefix = location
        if problem := bucket_name_problem(bucket):
            raise field_error(field, f"dataset {problem}")
        if not DATA_PREFIX.match(prefix):
            raise field_error(field, f"dataset key prefix {prefix!r} has spaces, which the DataPrefix parameter "
                                     "refuses")
    if run.data and run.program.builtin:
        flagged = data_location(dataclasses.replace(run, data=""))
        if flagged is not None and flagged != location:
            raise field_error("run.data", f"names s3://{'/'.join(filter(None, location or ()))} but the built-in "
                        f"trainer reads --data s3://{'/'.join(filter(None, flagged))}: read access would be "
                        "granted to the wrong one")


def trainer_package_problem(spec: str) -> str | None:
    """Why user data could not pip-install `spec` on an instance (it passes it to pip as one word), or
    None. Empty ships this checkout's wheel with the stack. A requirement must name one exact version:
    anything looser runs as root whatever an index serves under that name, today or once someone
    registers it."""
    if spec == SHIPPED_TRAINER_PACKAGE:
        return None
    if any(char.isspace() for char in spec):
        return (f"{spec!r} holds spaces: write one word, e.g. spot-trainer==0.2.0, or leave run.trainer_package "
                "out to ship this checkout's runtime with the stack")
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
    if not PINNED_REQUIREMENT.match(spec):
        return (f"{spec!r} is not pinned to one version: an instance would run as root whatever the index serves "
                "under that name. Pin it (name==X.Y.Z), or leave run.trainer_package out to ship this checkout's "
                "runtime with the stack")
    return None


def _fixed_point(price: float) -> str:
    """1e-05 → '0.00001': the SpotMaxPrice parameter (and EC2) take plain decimals only."""
    if not 0 < price <= MAX_PRICE_USD:  # out of range (or nan): refused below, in the user's own spelling
        return str(price)
    return plain_decimal(price)


def _check_capacity(cap: CapacitySpec) -> None:
    if problem := check_instance_types(list(cap.instance_types)):
        raise field_error("capacity.instance_types", problem)
    if not 1 <= cap.nodes <= MAX_NODES:
        raise field_error("capacity.nodes", f"expected 1 to {MAX_NODES}, got {cap.nodes}")
    if cap.max_price:
        try:
            price = float(cap.max_price)
        except ValueError:
            raise field_error("capacity.max_price", f"expected USD per hour like 0.45, got {cap.max_price!r}") from None
        if not price > 0:
            raise field_error("capacity.max_price", f"expected a positive price, got {cap.max_price!r}")
        if not price < MAX_PRICE_USD:  # also catches inf and nan
            raise field_error("capacity.max_price", f"{cap.max_price!r} USD/hour is beyond any instance's price "
                        f"(below {MAX_PRICE_USD:g}); leave it out for the on-demand cap")
        if not PLAIN_DECIMAL.match(cap.max_price):  # "0.45 ", "1_000": float() reads them, the template does not
            raise field_error("capacity.max_price", f"expected a plain decimal like 0.45, got {cap.max_price!r}")
    if not ROOT_DEVICE.match(cap.root_device):
        raise field_error("capacity.root_device",
                    f"expected a device name like /dev/sda1 or /dev/xvda, got {cap.root_device!r}")
    if not (SSM_PATH.match(cap.ami) or AMI_ID.match(cap.ami)):
        raise field_error("capacity.ami", f"expected an SSM parameter path or ami-… id, got {cap.ami!r}")
    if problem := check_image_architecture(cap.ami, cap.instance_types):
        raise field_error("capacity.ami", problem)
    if (problem := _out_of_bounds("capacity.volume_size", cap.volume_size)) is not None:
        raise field_error("capacity.volume_size", f"expected {problem} GiB, got {cap.volume_size}")


def _check_distributed(cap: CapacitySpec, given: Collection[str]) -> CapacitySpec:
    """Multi-node fields; returns the spec with min_nodes filled in (default: every node)."""
    if cap.distributed and cap.nodes < 2:
        raise field_error("capacity.distributed",
                          f"a distributed job needs at least 2 nodes, capacity.nodes is {cap.nodes}")
    if "min_nodes" in given and not cap.distributed:
        raise field_error("capacity.min_nodes", "only applies when capacity.distributed = true (otherwise one node "
                    "trains and the others stand by)")
    if "min_nodes" in given and not 1 <= cap.min_nodes <= cap.nodes:
        raise field_error("capacity.min_nodes", f"expected 1 to capacity.nodes ({cap.nodes}), got {cap.min_nodes}")
    if cap.placement not in PLACEMENTS:
        raise field_error("capacity.placement", f'expected "cluster" or "", got {cap.placement!r}')
    if cap.placement and not cap.distributed:
        raise field_error("capacity.placement", "only applies when capacity.distributed = true: a standby gains "
                    "nothing from sitting next to the node that trains")
    return dataclasses.replace(cap, min_nodes=cap.min_nodes if "min_nodes" in given else cap.nodes)


def _check_cluster_network(cap: CapacitySpec, net: NetworkSpec) -> None:
    """A cluster placement group lives in one AZ; listed subnets' AZs are unknown at synth, so one subnet."""
    if cap.placement == "cluster" and len(net.subnets) > 1:
        raise field_error("capacity.placement", f'"cluster" keeps every node in one AZ: network.subnets must list '
                    f"exactly one subnet, got {len(net.subnets)}")


def _check_network(net: NetworkSpec) -> NetworkSpec:
    if net.subnets:
        bad = next((s for s in net.subnets if not SUBNET_ID.match(s)), None)
        if bad:
            raise field_error("network.subnets", 'expected subnet-… ids (8 or 17 hex digits), "create" or '
                              f'"parameter", got {bad!r}')
        if not net.vpc_id:
            raise field_error("network.vpc_id", "required (vpc-…) when network.subnets lists subnets")
        if len(set(net.subnets)) != len(net.subnets):
            raise field_error("network.subnets", "lists a subnet twice")
    if net.vpc_id and not VPC_ID.match(net.vpc_id):
        raise field_error("network.vpc_id", f"expected a VPC id like vpc-0123456789abcdef0, got {net.vpc_id!r}")
    if net.subnets:
        return dataclasses.replace(net, create=False)
    if net.vpc_id and net.create:
        raise field_error("network.vpc_id", 'only used with network.subnets (a list, or "parameter"); with the '
                    'default "create" the stack makes its own VPC')
    return net


def _check_access(access: AccessSpec) -> None:
    if access.ssh_cidr and (problem := check_cidr(access.ssh_cidr)):
        raise field_error("access.ssh_cidr", problem)
    if ":" in access.ssh_cidr:
        raise field_error("access.ssh_cidr", f"{access.ssh_cidr!r} is IPv6; the SSH rule takes an IPv4 range like "
                    "203.0.113.0/24 (or use Session Manager)")
    if access.ssh_cidr in ("0.0.0.0/0", "::/0"):
        raise field_error("access.ssh_cidr", "refusing SSH from the whole internet; give your own range")
    if access.ssh_cidr and not access.key_pair:
        raise field_error("access.key_pair", "required when access.ssh_cidr opens SSH")


def _check_storage(storage: StorageSpec) -> None:
    if storage.bucket and (problem := bucket_name_problem(storage.bucket)):
        raise field_error("storage.bucket", problem)
    if not 1 <= storage.keep_checkpoints <= MAX_KEEP_CHECKPOINTS:
        raise field_error("storage.keep_checkpoints",
                    f"expected 1 to {MAX_KEEP_CHECKPOINTS}, got {storage.keep_checkpoints}")
    if storage.noncurrent_days < 1:
        raise field_error("storage.noncurrent_days", f"expected 1 or more days, got {storage.noncurrent_days}")
    if storage.log_retention_days not in LOG_RETENTION_DAYS:
        raise field_error("storage.log_retention_days", f"expected one of CloudWatch's values "
                    f"({', '.join(map(str, LOG_RETENTION_DAYS[:8]))}, …), got {storage.log_retention_days}")


def build_job(data: dict[str, Any], source: Path) -> JobSpec:
    unknown = sorted(set(data) - TOP_LEVEL)
    if unknown:
        raise field_error(unknown[0], unknown_key_message("", unknown[0], sorted(TOP_LEVEL), KEYS_BY_PLACE))
    name = _check_type("name", data.get("name", source.stem), str)
    if not JOB_NAME.match(name):
        raise field_error("name", f"{name!r} must be {JOB_NAME_RULE}")
    sections = {key: _read_section(key, data.get(key, {}), cls) for key, cls in SECTIONS.items()}
    _check_run(sections["run"], source)
    _check_capacity(sections["capacity"])
    check_regions(sections["capacity"])
    sections["capacity"] = _check_distributed(sections["capacity"], given=data.get("capacity", {}))
    if sections["capacity"].distributed and (launcher := own_launcher(sections["run"].command)):
        raise field_error("run.command", f"starts its own {launcher}: with capacity.distributed = true the agent "
                          "already runs the command under its torchrun, once per GPU; give the script itself, "
                          'e.g. "python train.py"')
    sections["network"] = _check_network(sections["network"])
    _check_cluster_network(sections["capacity"], sections["network"])
    _check_access(sections["access"])
    _check_storage(sections["storage"])
    check_notify(sections["notify"])
    check_schedule(sections["schedule"], sections["run"], given=data.get("schedule", {}))
    version = _check_type("userdata_version", data.get("userdata_version", CURRENT_USERDATA_VERSION), str)
    description = _check_type("description", data.get("description", setting("description").default), str)
    # The template's Description is "Spot Trainer job NAME: " + this; the limit applies to the whole.
    whole = len(f"Spot Trainer job {name}: {description}".encode())
    if whole > MAX_DESCRIPTION_BYTES:
        raise field_error("description", f"{len(description.encode())} bytes; with the stack's own prefix the "
                    f"template's description would be {whole}, and CloudFormation takes at most "
                    f"{MAX_DESCRIPTION_BYTES}")
    job = JobSpec(
        name=name,
        source=source,
        description=description,
        userdata_version=version,
        **sections,
    )
    check_regions_fit(job)
    return job


MAX_DESCRIPTION_BYTES = 1024  # a template's Description
LOCAL_ARCHIVES = (".whl", ".tar.gz", ".zip")
# A name, optional [extras] and optional comma-separated version clauses (PEP 508, no markers or spaces).
PIP_REQUIREMENT = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,-]+\])?"
                             r"((~=|===?|!=|<=?|>=?)[A-Za-z0-9.*+!_-]+(,(~=|===?|!=|<=?|>=?)[A-Za-z0-9.*+!_-]+)*)?$")
PINNED_REQUIREMENT = re.compile(r"^[^=<>!~,]+===?[A-Za-z0-9.+!_-]+$")  # name[extras]==one version
ROOT_DEVICE = re.compile(r"^/dev/[a-z0-9]+$")
VPC_ID = re.compile(r"^vpc-([0-9a-f]{8}|[0-9a-f]{17})$")  # EC2's id forms, as CloudFormation checks them
SUBNET_ID = re.compile(r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")
PLAIN_DECIMAL = re.compile(r"^[0-9]*\.?[0-9]+$")  # the SpotMaxPrice parameter's own pattern, less the empty value
DATA_PREFIX = re.compile(r"^[^\s]*$")  # the DataPrefix parameter takes no spaces
MAX_PRICE_USD = 1000.0  # per instance-hour: far above any on-demand price, so a typo is caught


def check_cidr(value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return f"{value!r} is not a CIDR block like 203.0.113.0/24"
    return None
