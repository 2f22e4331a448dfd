"""Job files (TOML) validated into a typed JobSpec; every problem is one line naming the field."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

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


class _FromTable:
    def __repr__(self) -> str:
        return "TABLE (a default @from_table never filled in)"


TABLE: Any = _FromTable()  # a job-file field's default: the settings table's, put in its place by `from_table`
_Spec = TypeVar("_Spec")


def from_table(section: str) -> Callable[[type[_Spec]], type[_Spec]]:
    """Gives each field of a section's spec declared `= TABLE` the default the settings table holds for
    `section.field`, so the table alone spells a field's default (a field it lacks fails at import). It goes
    below `@dataclass`, which must see the defaults filled in."""
    def fill(cls: type[_Spec]) -> type[_Spec]:
        if is_dataclass(cls):
            raise TypeError(f"{cls.__name__}: @from_table must stand below @dataclass, not above it")
        for name in cls.__annotations__:
            if cls.__dict__.get(name) is TABLE:
                setattr(cls, name, setting(f"{section}.{name}").default)
        return cls
    return fill


@dataclass(frozen=True)
@from_table("run")
class RunSpec:
    command: str = TABLE
    train_args: str = TABLE
    setup: str = TABLE
    workdir: str = TABLE
    checkpoint_dir: str = TABLE
    data: str = TABLE
    torch: str = TABLE
    env_cache: bool = TABLE
    trainer_package: str = TABLE
    checkpoint_files: tuple[str, ...] = TABLE
    secrets: tuple[str, ...] = TABLE
    stop_signal: str = TABLE
    grace_seconds: int = TABLE
    restart_budget: int = TABLE
    react_to_rebalance: bool = TABLE
    save_warn_seconds: int = TABLE

    @property
    def program(self) -> Program:
        """The built-in trainer or the user's own command, told apart once."""
        return Program(self.command)


@dataclass(frozen=True)
@from_table("capacity")
class CapacitySpec:
    instance_types: tuple[str, ...] = TABLE
    nodes: int = TABLE
    distributed: bool = TABLE
    min_nodes: int = TABLE
    placement: str = TABLE
    max_price: str = TABLE
    ami: str = TABLE
    volume_size: int = TABLE
    root_device: str = TABLE
    regions: tuple[str, ...] = TABLE
    region_wait: str = TABLE


@dataclass(frozen=True)
@from_table("network")
class NetworkSpec:
    subnets: tuple[str, ...] = TABLE
    vpc_id: str = TABLE
    create: bool = True


@dataclass(frozen=True)
@from_table("access")
class AccessSpec:
    ssh_cidr: str = TABLE
    key_pair: str = TABLE


@dataclass(frozen=True)
@from_table("storage")
class StorageSpec:
    bucket: str = TABLE
    keep_checkpoints: int = TABLE
    noncurrent_days: int = TABLE
    log_retention_days: int = TABLE


@dataclass(frozen=True)
@from_table("notify")
class NotifySpec:
    email: str = TABLE
    stall_minutes: int = TABLE
    restart_on_stall: bool = TABLE


@dataclass(frozen=True)
@from_table("schedule")
class ScheduleSpec:
    deadline: str = TABLE
    total_steps: int = TABLE
    max_spot_wait: str = TABLE
    margin: str = TABLE
    budget_usd: float = TABLE


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
