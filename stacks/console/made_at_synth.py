"""What a console parameter takes from the job when the template is made, by the parameter's name in the
settings table: whether the job is offered it at all, a default other than its job-file field's value,
and a shape (pattern, type, words) that depends on the job. A parameter named in none of these is the
table's as it stands, its default the value of its field."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from spot_trainer import setting_patterns as pattern
from spot_trainer.settings import ConsoleParameter, console_parameter, setting_of_parameter
from stacks.instance.userdata_versions import userdata_version
from stacks.job.checkpoint_dir_field import CHECKPOINT_FOLDER_PATTERN, CHECKPOINT_FOLDER_RULE
from stacks.job.instance_types import architecture
from stacks.job.schedule_fields import budget_text
from stacks.job.spec import AMI_ID, JobSpec, data_location, setting_text

SINGLE_SUBNET_TYPE = "AWS::EC2::Subnet::Id"
# The type is fixed by the job file's `ami`: each takes one form only, so say which.
IMAGE_DESCRIPTIONS = {
    "AWS::EC2::Image::Id": "AMI id (ami-…); for an SSM path, set capacity.ami to one",
    "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>": "SSM parameter path of the image; for an ami-… id, set "
                                                       "capacity.ami to one",
}

# An element of the list whose family has a "g" after its generation: Graviton (instance_types.architecture).
_ARM_ELEMENT = r"(?:.*,)?[a-z]+[0-9]+[a-z]*g"
# Per architecture: no element is Graviton, or every element is.
_SAME_ARCHITECTURE = {"x86_64": rf"(?!{_ARM_ELEMENT})", "arm64": r"(?!(?:.*,)?(?![a-z]+[0-9]+[a-z]*g)[^,])"}
_NO_TYPE_TWICE = r"(?!(?:.*,)?([^,]+),(?:.*,)?\1(?:,|$))"


def instance_types_pattern(count: int, arch: str) -> str:
    """Exactly `count` names, none twice, all of the job's architecture: the template splits the value into
    that many overrides (a longer list would lose its tail silently, a shorter one fail at deploy), and
    the image is chosen for the architecture at synth (a type of the other could never launch)."""
    name = r"[a-z][a-z0-9-]*[0-9][a-z0-9-]*\.[a-z0-9-]+"
    return rf"^{_NO_TYPE_TWICE}{_SAME_ARCHITECTURE[arch]}{name}(,{name}){{{count - 1}}}$"


# ---- whether the job is offered the parameter ----

def _network_chosen_at_deploy(job: JobSpec) -> bool:
    return not job.network.create


def _own_command_from_v2(job: JobSpec) -> bool:
    """The built-in trainer saves where it is told, and the CLI's 50 KiB for a template without assets has
    no room for the folder; user data carries it from v2."""
    return not job.run.program.builtin and userdata_version(job.userdata_version).checkpoint_dir


# ---- its default, where it is not its field's value ----

def _data_bucket(job: JobSpec) -> str:
    location = data_location(job.run)
    return location[0] if location else ""


def _data_prefix(job: JobSpec) -> str:
    location = data_location(job.run)
    return location[1] + "/" if location and location[1] else ""


def _min_nodes(job: JobSpec) -> str:
    return str(job.capacity.min_nodes or job.capacity.nodes)


def _total_steps(job: JobSpec) -> str:
    return str(job.schedule.total_steps) if job.schedule.total_steps else ""


def _budget(job: JobSpec) -> str:
    return budget_text(job.schedule.budget_usd) if job.schedule.budget_usd else ""


# No default when the job leaves the choice to deploy time (console pick or --parameters).
def _vpc(job: JobSpec) -> str | None:
    return job.network.vpc_id or None


def _subnets(job: JobSpec) -> str | None:
    return ",".join(job.network.subnets) or None


# ---- its shape, where the job decides it ----

def _setup_on_one_line_for_heredocs(parameter: ConsoleParameter, job: JobSpec) -> ConsoleParameter:
    """From v2 a value travels base64-encoded and may span lines; v1's here-documents take one line only
    (a line equal to their delimiter would end the value and run the rest as root at boot)."""
    if userdata_version(job.userdata_version).heredoc_header:
        return replace(parameter, pattern=pattern.ONE_LINE, rule=pattern.ONE_LINE_RULE)
    return parameter


def _checkpoint_folder(parameter: ConsoleParameter, job: JobSpec) -> ConsoleParameter:
    return replace(parameter, pattern=CHECKPOINT_FOLDER_PATTERN, rule=CHECKPOINT_FOLDER_RULE)


def _instance_types(parameter: ConsoleParameter, job: JobSpec) -> ConsoleParameter:
    count = len(job.capacity.instance_types)
    arch = architecture(job.capacity.instance_types[0])  # the job file's types share one, as its image does
    return replace(parameter, pattern=instance_types_pattern(count, arch),
                   rule=f"exactly {count} {arch} types, comma-separated, none twice, like g5.xlarge (count and "
                        "architecture are fixed at synth)",
                   description=f"Exactly {count} spot instance types, most preferred first")


def _image(parameter: ConsoleParameter, job: JobSpec) -> ConsoleParameter:
    image_type = "AWS::EC2::Image::Id" if AMI_ID.match(job.capacity.ami) else \
        "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    return replace(parameter, type=image_type, description=IMAGE_DESCRIPTIONS[image_type])


def _subnets_in_one_az_for_a_cluster(parameter: ConsoleParameter, job: JobSpec) -> ConsoleParameter:
    """Several subnets widen the spot pools; a cluster placement group lives in one AZ, so it takes one."""
    if job.capacity.placement == "cluster":
        return replace(parameter, label="Subnet", type=SINGLE_SUBNET_TYPE,
                       description="The one subnet to launch in: a cluster placement group keeps every node in one AZ")
    return replace(parameter, type="List<AWS::EC2::Subnet::Id>",
                   description="Subnets to launch in; several AZs widen the spot pools")


T = TypeVar("T")


def _of_table_parameters(made: dict[str, T]) -> dict[str, T]:
    """`made`, once each name is found to be a parameter of the settings table (KeyError names one that is not)."""
    for name in made:
        console_parameter(name)
    return made


OFFERED_ONLY_WHEN: dict[str, Callable[[JobSpec], bool]] = _of_table_parameters({
    "CheckpointFolder": _own_command_from_v2,
    "VpcId": _network_chosen_at_deploy,
    "Subnets": _network_chosen_at_deploy,
})
DEFAULT_FROM_JOB: dict[str, Callable[[JobSpec], str | None]] = _of_table_parameters({
    "DataBucket": _data_bucket,
    "DataPrefix": _data_prefix,
    "MinNodes": _min_nodes,
    "TotalSteps": _total_steps,
    "BudgetUSD": _budget,
    "VpcId": _vpc,
    "Subnets": _subnets,
})
SHAPED_BY_JOB: dict[str, Callable[[ConsoleParameter, JobSpec], ConsoleParameter]] = _of_table_parameters({
    "SetupCommand": _setup_on_one_line_for_heredocs,
    "CheckpointFolder": _checkpoint_folder,
    "InstanceTypes": _instance_types,
    "ImageId": _image,
    "Subnets": _subnets_in_one_az_for_a_cluster,
})


def offered(parameter: ConsoleParameter, job: JobSpec) -> bool:
    """Whether the job's template has the parameter: every job's has most, some only some jobs'."""
    only_when = OFFERED_ONLY_WHEN.get(parameter.name)
    return only_when is None or only_when(job)


def shaped(parameter: ConsoleParameter, job: JobSpec) -> ConsoleParameter:
    """The parameter as the job's template has it: the table's, with what depends on the job made now."""
    shape = SHAPED_BY_JOB.get(parameter.name)
    return parameter if shape is None else shape(parameter, job)


def job_default(parameter: ConsoleParameter, job: JobSpec) -> str | None:
    """The parameter's default: the value of its job-file field, or the setting's own for one that has no
    field (the working directory), unless the parameter has a rule of its own above."""
    if parameter.name in DEFAULT_FROM_JOB:
        return DEFAULT_FROM_JOB[parameter.name](job)
    setting = setting_of_parameter(parameter.name)
    return setting_text(job.value_of(setting.field) if setting.field else setting.default)
