"""Job files (TOML) validated into a typed JobSpec; every problem is one line naming the field."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spot_trainer.aws_names import stack_name
from spot_trainer.builtin_arguments import ArgumentsError, check_arguments
from spot_trainer.command_text import Program
from spot_trainer.settings import setting

JOBS_DIR = Path(__file__).resolve().parents[2] / "jobs"
SSM_PATH = re.compile(r"^/[A-Za-z0-9_./-]+$")
AMI_ID = re.compile(r"^ami-[0-9a-f]{8,17}$")
PLACEMENTS = ("", "cluster")
DEFAULT_AMI = setting("capacity.ami").default
# Empty: the wheel of this checkout, built at synth and shipped with the stack (stacks/instance/runtime_wheel.py).
SHIPPED_TRAINER_PACKAGE = setting("run.trainer_package").default

# v2 starts the runtime as spot_trainer (spot-trainer >= 0.2); v1 starts it as trainer (0.1 only).
CURRENT_USERDATA_VERSION: str = setting("userdata_version").default


def data_location(run: RunSpec) -> tuple[str, str] | None:
    """(bucket, prefix) of the S3 data the job reads: run.data, else the built-in trainer's --data."""
    uri = run.data
    if not uri and run.program.builtin:
        uri = builtin_data(run.train_args)
    if not uri.startswith("s3://"):
        return None
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def plain_decimal(value: float) -> str:
    """1e-05 → '0.00001', 50.0 → '50': the form CloudFormation parameters and EC2 take (6 places at most)."""
    return f"{value:.6f}".rstrip("0").rstrip(".")


def setting_text(value: Any) -> str:
    """A job-file value as a parameter's default and the agent's environment file spell it (a list:
    comma-separated; a boolean: true or false)."""
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def builtin_data(train_args: str) -> str:
    """`--data` as the built-in trainer's own parser reads it ('' when not given, or when the parser refuses
    the arguments: run.train_args' own check names that)."""
    try:
        return str(check_arguments(shlex.split(train_args)).data or "")
    except (ArgumentsError, ValueError):
        return ""


class JobSpecError(ValueError):
    """A job file is unusable; str() is one line naming the file and field."""


def field_error(field: str, message: str) -> JobSpecError:
    return JobSpecError(f"{field}: {message}")


def out_of_bounds(field: str, value: float) -> str | None:
    """The field's range in the settings table ("10..7200") when `value` lies outside it, else None."""
    bounds = setting(field).bounds
    if bounds is None or bounds[0] <= value <= bounds[1]:
        return None
    return "{}..{}".format(*bounds)


@dataclass(frozen=True)
class RunSpec:
    command: str = setting("run.command").default
    train_args: str = setting("run.train_args").default
    setup: str = setting("run.setup").default
    workdir: str = setting("run.workdir").default
    checkpoint_dir: str = setting("run.checkpoint_dir").default
    data: str = setting("run.data").default
    torch: str = setting("run.torch").default
    env_cache: bool = setting("run.env_cache").default
    trainer_package: str = setting("run.trainer_package").default
    checkpoint_files: tuple[str, ...] = setting("run.checkpoint_files").default
    secrets: tuple[str, ...] = setting("run.secrets").default
    stop_signal: str = setting("run.stop_signal").default
    grace_seconds: int = setting("run.grace_seconds").default
    restart_budget: int = setting("run.restart_budget").default
    react_to_rebalance: bool = setting("run.react_to_rebalance").default
    save_warn_seconds: int = setting("run.save_warn_seconds").default

    @property
    def program(self) -> Program:
        """The built-in trainer or the user's own command, told apart once."""
        return Program(self.command)


@dataclass(frozen=True)
class CapacitySpec:
    instance_types: tuple[str, ...] = setting("capacity.instance_types").default
    nodes: int = setting("capacity.nodes").default
    distributed: bool = setting("capacity.distributed").default
    min_nodes: int = setting("capacity.min_nodes").default
    placement: str = setting("capacity.placement").default
    max_price: str = setting("capacity.max_price").default
    ami: str = setting("capacity.ami").default
    volume_size: int = setting("capacity.volume_size").default
    root_device: str = setting("capacity.root_device").default
    regions: tuple[str, ...] = setting("capacity.regions").default
    region_wait: str = setting("capacity.region_wait").default


@dataclass(frozen=True)
class NetworkSpec:
    subnets: tuple[str, ...] = setting("network.subnets").default
    vpc_id: str = setting("network.vpc_id").default
    create: bool = True


@dataclass(frozen=True)
class AccessSpec:
    ssh_cidr: str = setting("access.ssh_cidr").default
    key_pair: str = setting("access.key_pair").default


@dataclass(frozen=True)
class StorageSpec:
    bucket: str = setting("storage.bucket").default
    keep_checkpoints: int = setting("storage.keep_checkpoints").default
    noncurrent_days: int = setting("storage.noncurrent_days").default
    log_retention_days: int = setting("storage.log_retention_days").default


@dataclass(frozen=True)
class NotifySpec:
    email: str = setting("notify.email").default
    stall_minutes: int = setting("notify.stall_minutes").default
    restart_on_stall: bool = setting("notify.restart_on_stall").default


@dataclass(frozen=True)
class ScheduleSpec:
    deadline: str = setting("schedule.deadline").default
    total_steps: int = setting("schedule.total_steps").default
    max_spot_wait: str = setting("schedule.max_spot_wait").default
    margin: str = setting("schedule.margin").default
    budget_usd: float = setting("schedule.budget_usd").default


@dataclass(frozen=True)
class JobSpec:
    name: str
    source: Path
    description: str = ""
    userdata_version: str = CURRENT_USERDATA_VERSION
    run: RunSpec = RunSpec()
    capacity: CapacitySpec = CapacitySpec()
    network: NetworkSpec = NetworkSpec()
    access: AccessSpec = AccessSpec()
    storage: StorageSpec = StorageSpec()
    notify: NotifySpec = NotifySpec()
    schedule: ScheduleSpec = ScheduleSpec()

    @property
    def stack_name(self) -> str:
        return stack_name(self.name)

    def value_of(self, field: str) -> Any:
        """A job-file field's value, by the settings table's name for it ("run.grace_seconds", "userdata_version")."""
        section, _, key = field.rpartition(".")
        return getattr(getattr(self, section) if section else self, key)

    @property
    def workdir_path(self) -> Path | None:
        return (self.source.parent / self.run.workdir).resolve() if self.run.workdir else None
