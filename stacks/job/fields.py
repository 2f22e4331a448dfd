"""Field-by-field reading of a job file: unknown keys, types, then the meaning of each value, section by
section in the order a job file reads. Each section's checks live in a module of their own (run_fields,
capacity_fields, network_fields, schedule_fields, regions_field); the storage's few stand here."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path
from typing import Any

from spot_trainer.aws_names import JOB_NAME, JOB_NAME_RULE, bucket_name_problem
from spot_trainer.settings import LOG_RETENTION_DAYS, MAX_KEEP_CHECKPOINTS, SETTINGS, setting
from stacks.job.capacity_fields import check_capacity, check_cluster_network, check_distributed, fixed_point
from stacks.job.key_hints import unknown_key_message
from stacks.job.launcher_command import own_launcher
from stacks.job.network_fields import check_access, check_network
from stacks.job.regions_field import check_regions, check_regions_fit
from stacks.job.run_fields import check_run
from stacks.job.schedule_fields import check_notify, check_schedule, utc_text
from stacks.job.spec import (
    CURRENT_USERDATA_VERSION,
    AccessSpec,
    CapacitySpec,
    JobSpec,
    NetworkSpec,
    NotifySpec,
    RunSpec,
    ScheduleSpec,
    StorageSpec,
    field_error,
)

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
            value = fixed_point(value)
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
    check_run(sections["run"], source)
    check_capacity(sections["capacity"])
    check_regions(sections["capacity"])
    sections["capacity"] = check_distributed(sections["capacity"], given=data.get("capacity", {}))
    if sections["capacity"].distributed and (launcher := own_launcher(sections["run"].command)):
        raise field_error("run.command", f"starts its own {launcher}: with capacity.distributed = true the agent "
                          "already runs the command under its torchrun, once per GPU; give the script itself, "
                          'e.g. "python train.py"')
    sections["network"] = check_network(sections["network"])
    check_cluster_network(sections["capacity"], sections["network"])
    check_access(sections["access"])
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
