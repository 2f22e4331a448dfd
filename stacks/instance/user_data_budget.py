"""EC2 takes at most 16 KiB of user data, and refuses more only when an instance launches, long after
deploy said yes. The job file's values are measured at synth; what a console user may type instead is
bounded by each free-text parameter's MaxLength, sized so that all of them at once still fit."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import CfnParameter

from spot_trainer.settings import env_setting
from stacks.instance.user_data import MAX_USER_DATA_BYTES, deployed_size
from stacks.job.checkpoint_dir_field import MAX_LENGTH as CHECKPOINT_DIR_MAX
from stacks.job.spec import JobSpec, JobSpecError

# Names only known at deploy time (bucket, region, topic ARN) are measured as their short synth-time
# tokens; this covers their real length.
DEPLOY_TIME_NAMES_BYTES = 512
# The shipped runtime's URI at its longest: s3://<asset bucket, 63>/<content hash, 64>.whl
SHIPPED_WHEEL_URI = f"s3://{'b' * 63}/{'0' * 64}.whl"


def parameter_name(env: str) -> str:
    """The console parameter that carries a SPOT_* setting (the settings table's)."""
    return env_setting(env).console[0].name


def typed_values(job: JobSpec, parameters: Mapping[str, CfnParameter]) -> dict[str, tuple[str, CfnParameter]]:
    """The user data variables a console user types in full, with the job file's value and the parameter;
    `parameters`: the template's, by their names in the settings table."""
    values = {"SPOT_COMMAND": job.run.command, "SPOT_TRAIN_ARGS": job.run.train_args,
              "SPOT_SETUP_COMMAND": job.run.setup, "SPOT_TRAINER_PACKAGE": job.run.trainer_package or SHIPPED_WHEEL_URI,
              "SPOT_WORKDIR": str(parameters[parameter_name("SPOT_WORKDIR")].default)}
    return {env: (value, parameters[parameter_name(env)]) for env, value in values.items()}


def spare_bytes(job: JobSpec, header: dict[str, str], typed: dict[str, str]) -> int:
    size = deployed_size(job.userdata_version, header, typed)
    if size > MAX_USER_DATA_BYTES - DEPLOY_TIME_NAMES_BYTES:
        raise JobSpecError(f"{job.source}: run.command, run.train_args and run.setup make the user data "
                           f"about {size + DEPLOY_TIME_NAMES_BYTES} bytes once deployed, over EC2's "
                           f"{MAX_USER_DATA_BYTES}: move long commands into a script in run.workdir")
    return MAX_USER_DATA_BYTES - size


def bound_user_data(job: JobSpec, parameters: Mapping[str, CfnParameter], header: dict[str, str]) -> None:
    """Refuse a job file whose values overflow; give each typed parameter an equal share of what is left.
    A value travels base64-encoded (4 bytes per 3, plus up to 3 of padding), one byte per ASCII character."""
    typed = typed_values(job, parameters)
    # A console checkpoint folder is bounded by its own pattern: counted at its longest, not given a share.
    offered = parameter_name("SPOT_CHECKPOINT_DIR") in parameters
    longest = {"SPOT_CHECKPOINT_DIR": "x" * CHECKPOINT_DIR_MAX} if offered else {}
    spare = spare_bytes(job, header, {**{name: value for name, (value, _) in typed.items()}, **longest})
    share = max(0, (spare - DEPLOY_TIME_NAMES_BYTES - 3 * len(typed)) * 3 // 4 // len(typed))
    for value, param in typed.values():
        param.max_length = len(value.encode()) + share
        rule = f"at most {param.max_length:g} characters"
        param.constraint_description = f"{param.constraint_description}; {rule}" if param.constraint_description \
            else rule
