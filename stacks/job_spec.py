"""Job files (TOML) validated into a typed JobSpec; every problem is one line naming the field."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from spot_trainer.builtin.arguments import ArgumentsError, check_arguments

JOBS_DIR = Path(__file__).resolve().parent.parent / "jobs"
JOB_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
SSM_PATH = re.compile(r"^/[A-Za-z0-9_./-]+$")
AMI_ID = re.compile(r"^ami-[0-9a-f]{8,17}$")
SIGNALS = ("SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2")
PLACEMENTS = ("", "cluster")
DEFAULT_AMI = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
# Empty: the wheel of this checkout, built at synth and shipped with the stack (stacks/runtime_wheel.py).
SHIPPED_TRAINER_PACKAGE = ""
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
                      2557, 2922, 3288, 3653)


MAX_NODES = 64  # instances of one job; the console's Nodes pattern says the same
MAX_KEEP_CHECKPOINTS = 999
MAX_STALL_MINUTES = 1440  # an alarm looks back at most one day at one-minute periods
DEFAULT_STALL_MINUTES = 30
DEFAULT_DEADLINE_MARGIN = "30m"

# v2 starts the runtime as spot_trainer (spot-trainer >= 0.2); v1 starts it as trainer (0.1 only).
CURRENT_USERDATA_VERSION = "v2"


def data_location(run: RunSpec) -> tuple[str, str] | None:
    """(bucket, prefix) of the S3 data the job reads: run.data, else the built-in trainer's --data."""
    uri = run.data
    if not uri and run.command == "builtin":
        uri = builtin_data(run.train_args)
    if not uri.startswith("s3://"):
        return None
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def plain_decimal(value: float) -> str:
    """1e-05 → '0.00001', 50.0 → '50': the form CloudFormation parameters and EC2 take (6 places at most)."""
    return f"{value:.6f}".rstrip("0").rstrip(".")


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


@dataclass(frozen=True)
class RunSpec:
    command: str = "builtin"
    train_args: str = ""
    setup: str = ""
    workdir: str = ""  # local directory shipped with the job (a CDK asset); "" ships nothing
    checkpoint_dir: str = ""  # where the command saves, from its working directory; "" = the agent's own
    data: str = ""  # s3://bucket/prefix the job reads (read access is granted); "" = train_args' --data
    trainer_package: str = SHIPPED_TRAINER_PACKAGE
    stop_signal: str = "SIGTERM"
    grace_seconds: int = 110
    restart_budget: int = 3
    react_to_rebalance: bool = False


@dataclass(frozen=True)
class CapacitySpec:
    instance_types: tuple[str, ...] = ("g5.xlarge", "g6.xlarge", "g4dn.xlarge")
    nodes: int = 1
    distributed: bool = False  # True: the nodes train together (torchrun elastic); False: one trains, others stand by
    min_nodes: int = 0  # distributed: fewest nodes that keep training; 0 = not given, read as `nodes`
    placement: str = ""  # "cluster": every node in one cluster placement group (one AZ); "" = none
    max_price: str = ""  # USD/hour per instance; "" = the on-demand price caps it (AWS default)
    ami: str = DEFAULT_AMI  # SSM parameter path (or AMI id) of the image
    volume_size: int = 100
    root_device: str = "/dev/sda1"


@dataclass(frozen=True)
class NetworkSpec:
    subnets: tuple[str, ...] = ()  # empty + create=False → chosen at deploy time (parameter)
    vpc_id: str = ""
    create: bool = True


@dataclass(frozen=True)
class AccessSpec:
    ssh_cidr: str = ""
    key_pair: str = ""


@dataclass(frozen=True)
class StorageSpec:
    bucket: str = ""  # an existing bucket to keep checkpoints in; empty = the stack creates one
    keep_checkpoints: int = 3
    noncurrent_days: int = 30
    log_retention_days: int = 30


@dataclass(frozen=True)
class NotifySpec:
    email: str = ""  # subscribed to the job's topic (SNS asks the address to confirm); "" = none
    stall_minutes: int = DEFAULT_STALL_MINUTES  # no step for this long while instances run: alarm; 0 = none
    restart_on_stall: bool = False  # the agent also restarts a hung command once per step (agent/hang_watch.py)


@dataclass(frozen=True)
class ScheduleSpec:
    deadline: str = ""  # "" | UTC timestamp "2026-12-01T18:00:00Z" | duration from the first start "36h"
    total_steps: int = 0  # own commands: the steps the job takes; 0 = not given (builtin: its --steps)
    max_spot_wait: str = ""  # no working spot instance this long: on-demand; "" = wait for spot
    margin: str = DEFAULT_DEADLINE_MARGIN  # kept in hand before the deadline for boot, restore and safety
    budget_usd: float = 0.0  # the spending cap: at it the job checkpoints and stops; 0 = none


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
        return f"SpotTrainer-{self.name}"

    @property
    def workdir_path(self) -> Path | None:
        return (self.source.parent / self.run.workdir).resolve() if self.run.workdir else None
