"""CloudFormation parameters for console users: AWS-specific types, defaults from the job file,
grouped and labelled in the order a person fills them in (what to run → capacity → network →
schedule and alerts → storage → access)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aws_cdk import CfnParameter, Stack

from spot_trainer import setting_patterns as pattern
from spot_trainer.settings import console_parameter, env_setting, field_of_parameter
from stacks.instance.userdata_versions import userdata_version
from stacks.job.checkpoint_dir_field import CHECKPOINT_FOLDER_PATTERN, CHECKPOINT_FOLDER_RULE
from stacks.job.instance_types import architecture
from stacks.job.schedule_fields import budget_text
from stacks.job.spec import AMI_ID, JobSpec, JobSpecError, data_location

SINGLE_SUBNET_TYPE = "AWS::EC2::Subnet::Id"
# The type is fixed by the job file's `ami`: each takes one form only, so say which.
IMAGE_DESCRIPTIONS = {
    "AWS::EC2::Image::Id": "AMI id (ami-…); for an SSM path, set capacity.ami to one",
    "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>": "SSM parameter path of the image; for an ami-… id, set "
                                                       "capacity.ami to one",
}


@dataclass
class JobParameters:
    """Every parameter the stack reads, by role; `subnets`/`vpc_id` are None when the stack creates the network."""

    command: CfnParameter
    train_args: CfnParameter
    workdir: CfnParameter
    setup: CfnParameter
    trainer_package: CfnParameter
    instance_types: CfnParameter
    nodes: CfnParameter
    distributed: CfnParameter
    min_nodes: CfnParameter
    max_price: CfnParameter
    image: CfnParameter
    vpc_id: CfnParameter | None
    subnets: CfnParameter | None
    volume_size: CfnParameter
    existing_bucket: CfnParameter
    keep_checkpoints: CfnParameter
    noncurrent_days: CfnParameter
    log_retention: CfnParameter
    ssh_cidr: CfnParameter
    key_pair: CfnParameter
    data_bucket: CfnParameter
    data_prefix: CfnParameter
    notify_email: CfnParameter
    stall_minutes: CfnParameter
    deadline: CfnParameter
    total_steps: CfnParameter
    max_spot_wait: CfnParameter
    deadline_margin: CfnParameter
    budget: CfnParameter
    checkpoint_dir: CfnParameter | None = None  # own commands only: the built-in trainer saves where it is told
    by_name: dict[str, CfnParameter] = field(default_factory=dict)  # every one, by its name in the template


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


def _setup_constraint(version: str) -> dict[str, str]:
    """From v2 a value travels base64-encoded and may span lines; v1's here-documents take one line only
    (a line equal to their delimiter would end the value and run the rest as root at boot)."""
    if userdata_version(version).heredoc_header:
        return {"allowed_pattern": pattern.ONE_LINE, "constraint_description": pattern.ONE_LINE_RULE}
    return {}


def _param(stack: Stack, name: str, default: str | None, *, label: str = "",
           **made_at_synth: object) -> tuple[str, str, CfnParameter]:
    """The parameter as the settings table defines it; what depends on the job is made here."""
    spec = console_parameter(name)
    props: dict[str, object] = {"type": spec.type, "default": default, "description": spec.description}
    if spec.pattern:
        props["allowed_pattern"] = spec.pattern
    if spec.values:
        props["allowed_values"] = list(spec.values)
    if spec.rule:
        props["constraint_description"] = spec.rule
    return name, label or spec.label, CfnParameter(stack, name, **{**props, **made_at_synth})


def add_job_parameters(stack: Stack, job: JobSpec) -> JobParameters:
    run, cap, net, storage, access = job.run, job.capacity, job.network, job.storage, job.access
    location = data_location(run)
    data = (location[0], location[1] + "/" if location[1] else "") if location else ("", "")
    image_type = "AWS::EC2::Image::Id" if AMI_ID.match(cap.ami) else "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    arch = architecture(cap.instance_types[0])  # the job file's types share one, as its image does
    groups: list[tuple[str, list[tuple[str, str, CfnParameter]]]] = [
        ("What to run", [
            _param(stack, "TrainingCommand", run.command),
            _param(stack, "TrainArguments", run.train_args),
            _param(stack, "DataBucket", data[0]),
            _param(stack, "DataPrefix", data[1]),
            _param(stack, "WorkingDirectory", env_setting("SPOT_WORKDIR").default),
            *_checkpoint_folder(stack, job),
            _param(stack, "SetupCommand", run.setup, **_setup_constraint(job.userdata_version)),
            _param(stack, "TrainerPackage", run.trainer_package),
        ]),
        ("Capacity", [
            _param(stack, "InstanceTypes", ",".join(cap.instance_types),
                   allowed_pattern=instance_types_pattern(len(cap.instance_types), arch),
                   constraint_description=f"exactly {len(cap.instance_types)} {arch} types, comma-separated, none "
                                          "twice, like g5.xlarge (count and architecture are fixed at synth)",
                   description=f"Exactly {len(cap.instance_types)} spot instance types, most preferred first"),
            # A String with a pattern: a Number parameter takes 1.5, which the group refuses at deploy.
            _param(stack, "Nodes", str(cap.nodes)),
            _param(stack, "Distributed", str(cap.distributed).lower()),
            _param(stack, "MinNodes", str(cap.min_nodes or cap.nodes)),
            _param(stack, "SpotMaxPrice", cap.max_price),
            _param(stack, "ImageId", cap.ami, type=image_type, description=IMAGE_DESCRIPTIONS[image_type]),
        ]),
    ]
    vpc_id = subnets = None
    schedule, notify = job.schedule, job.notify
    alerts = ("Schedule and alerts", [
        _param(stack, "NotifyEmail", notify.email),
        _param(stack, "StallAlarmMinutes", str(notify.stall_minutes)),
        _param(stack, "Deadline", schedule.deadline),
        _param(stack, "TotalSteps", str(schedule.total_steps) if schedule.total_steps else ""),
        _param(stack, "MaxSpotWait", schedule.max_spot_wait),
        _param(stack, "DeadlineMargin", schedule.margin),
        _param(stack, "BudgetUSD", budget_text(schedule.budget_usd) if schedule.budget_usd else ""),
    ])
    if not net.create:
        # No default when the job leaves the choice to deploy time (console pick or --parameters).
        vpc_id = _param(stack, "VpcId", net.vpc_id or None)
        subnets = _subnets_param(stack, job)
        groups.append(("Network", [vpc_id, subnets]))
    groups += [
        alerts,
        ("Storage", [
            _param(stack, "ExistingBucket", storage.bucket),
            _param(stack, "VolumeSize", str(cap.volume_size)),
            _param(stack, "KeepCheckpoints", str(storage.keep_checkpoints)),
            # A String with a pattern: a Number parameter takes 1.5, which S3's lifecycle rule refuses.
            _param(stack, "CheckpointVersionRetentionDays", str(storage.noncurrent_days)),
            _param(stack, "LogRetentionDays", str(storage.log_retention_days)),
        ]),
        ("Access", [
            _param(stack, "SshCidr", access.ssh_cidr),
            # A String, not AWS::EC2::KeyPair::KeyName: that type rejects the empty "no key" value.
            _param(stack, "KeyPair", access.key_pair),
        ]),
    ]
    stack.template_options.metadata = {
        "AWS::CloudFormation::Interface": {
            "ParameterGroups": [
                {"Label": {"default": title}, "Parameters": [name for name, _, _ in params]}
                for title, params in groups
            ],
            "ParameterLabels": {
                name: {"default": label} for _, params in groups for name, label, _ in params
            },
        }
    }
    found = {name: param for _, params in groups for name, _, param in params}
    _check_defaults(found, job)
    return JobParameters(
        command=found["TrainingCommand"], train_args=found["TrainArguments"], workdir=found["WorkingDirectory"],
        setup=found["SetupCommand"], trainer_package=found["TrainerPackage"],
        instance_types=found["InstanceTypes"], nodes=found["Nodes"], distributed=found["Distributed"],
        min_nodes=found["MinNodes"], max_price=found["SpotMaxPrice"],
        image=found["ImageId"], vpc_id=vpc_id[2] if vpc_id else None, subnets=subnets[2] if subnets else None,
        volume_size=found["VolumeSize"], existing_bucket=found["ExistingBucket"],
        keep_checkpoints=found["KeepCheckpoints"],
        noncurrent_days=found["CheckpointVersionRetentionDays"], log_retention=found["LogRetentionDays"],
        ssh_cidr=found["SshCidr"], key_pair=found["KeyPair"],
        data_bucket=found["DataBucket"], data_prefix=found["DataPrefix"],
        notify_email=found["NotifyEmail"], stall_minutes=found["StallAlarmMinutes"], deadline=found["Deadline"],
        total_steps=found["TotalSteps"], max_spot_wait=found["MaxSpotWait"], deadline_margin=found["DeadlineMargin"],
        budget=found["BudgetUSD"], checkpoint_dir=found.get("CheckpointFolder"),
        by_name={**found, **({"VpcId": vpc_id[2], "Subnets": subnets[2]} if vpc_id and subnets else {})},
    )


def _checkpoint_folder(stack: Stack, job: JobSpec) -> list[tuple[str, str, CfnParameter]]:
    """Offered where a command of the user's own runs (from user data v2): the built-in trainer saves where
    it is told, and the CLI's 50 KiB for a template without assets has no room for it."""
    if job.run.command == "builtin" or not userdata_version(job.userdata_version).checkpoint_dir:
        return []
    return [_param(stack, "CheckpointFolder", job.run.checkpoint_dir, allowed_pattern=CHECKPOINT_FOLDER_PATTERN,
                   constraint_description=CHECKPOINT_FOLDER_RULE)]


def default_problem(param: CfnParameter) -> str | None:
    """Which of its own constraints a parameter's default breaks (CloudFormation's checks), or None."""
    if param.default is None:
        return None
    text = str(param.default)
    if param.allowed_pattern is not None and not re.fullmatch(param.allowed_pattern, text):
        return param.constraint_description or f"the pattern {param.allowed_pattern}"
    if param.allowed_values is not None and text not in param.allowed_values:
        return f"one of {', '.join(param.allowed_values)}"
    if param.max_length is not None and len(text) > param.max_length:
        return f"at most {param.max_length:g} characters"
    if param.min_length is not None and len(text) < param.min_length:
        return f"at least {param.min_length:g} characters"
    if param.type == "Number":
        try:
            number = float(text)
        except ValueError:
            return "a number"
        low, high = param.min_value, param.max_value
        if (low is not None and number < low) or (high is not None and number > high):
            return f"a number from {low if low is not None else '-inf'} to {high if high is not None else 'inf'}"
    return None


def _check_defaults(found: dict[str, CfnParameter], job: JobSpec) -> None:
    """A job-file value the checks let through but its parameter refuses would make a template whose own
    defaults the console rejects: stop at synth, naming the field."""
    data_field = "run.data" if job.run.data else "run.train_args"  # the dataset's is either
    for name, param in found.items():
        if rule := default_problem(param):
            field = data_field if field_of_parameter(name) == "run.data" else field_of_parameter(name) or name
            raise JobSpecError(f"{job.source}: {field}: {str(param.default)!r} would be the "
                               f"default of the {name} parameter, which takes {rule}")


def _subnets_param(stack: Stack, job: JobSpec) -> tuple[str, str, CfnParameter]:
    """Several subnets widen the spot pools; a cluster placement group lives in one AZ, so it takes one."""
    default = ",".join(job.network.subnets) or None
    if job.capacity.placement == "cluster":
        return _param(stack, "Subnets", default, label="Subnet", type=SINGLE_SUBNET_TYPE,
                      description="The one subnet to launch in: a cluster placement group keeps every node in one AZ")
    return _param(stack, "Subnets", default, type="List<AWS::EC2::Subnet::Id>",
                  description="Subnets to launch in; several AZs widen the spot pools")
