"""The [run] fields of a job file: the command and its arguments, the package user data installs, the
dataset, the checkpoint folder, the secrets and the stop signal, checked at synth."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

from spot_trainer import setting_patterns as pattern
from spot_trainer.aws_names import bucket_name_problem
from spot_trainer.builtin_arguments import arguments_problem
from spot_trainer.command_text import has_control_character, shadows_builtin
from spot_trainer.secret_refs import SecretRefError, parse_refs
from spot_trainer.signals import STOP_SIGNALS, builtin_stop_problem
from stacks.job.checkpoint_dir_field import check_checkpoint_dir, check_checkpoint_files
from stacks.job.spec import SHIPPED_TRAINER_PACKAGE, RunSpec, data_location, field_error, out_of_bounds
from stacks.job.workdir_field import check_workdir

# torch, then one or more PEP 440 version clauses: what pip takes and user data compares with the image's.
TORCH_REQUIREMENT = re.compile(r"^torch(?:(?:==|>=|<=|~=|!=|<|>)[0-9][0-9A-Za-z.+*]*)(?:,(?:==|>=|<=|~=|!=|<|>)"
                               r"[0-9][0-9A-Za-z.+*]*)*$")
LOCAL_ARCHIVES = (".whl", ".tar.gz", ".zip")
# A name, optional [extras] and optional comma-separated version clauses (PEP 508, no markers or spaces).
PIP_REQUIREMENT = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,-]+\])?"
                             r"((~=|===?|!=|<=?|>=?)[A-Za-z0-9.*+!_-]+(,(~=|===?|!=|<=?|>=?)[A-Za-z0-9.*+!_-]+)*)?$")
PINNED_REQUIREMENT = re.compile(r"^[^=<>!~,]+===?[A-Za-z0-9.+!_-]+$")  # name[extras]==one version


def check_run(run: RunSpec, source: Path) -> None:
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
        if (problem := out_of_bounds(field, value)) is not None:
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
        if not re.fullmatch(pattern.DATA_PREFIX, f"{prefix}/" if prefix else ""):  # as the parameter gets it
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
