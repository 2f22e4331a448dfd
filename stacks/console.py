"""CloudFormation parameters for console users: AWS-specific types, defaults from the job file,
grouped and labelled in the order a person fills them in (what to run → capacity → network →
schedule and alerts → storage → access)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import CfnParameter, Stack

from spot_trainer.storage.names import RESERVED_BUCKET_PREFIXES, RESERVED_BUCKET_SUFFIXES
from stacks.checkpoint_dir_field import CHECKPOINT_FOLDER_PATTERN, CHECKPOINT_FOLDER_RULE
from stacks.instance_types import architecture
from stacks.job_spec import (
    AMI_ID,
    LOG_RETENTION_DAYS,
    MAX_KEEP_CHECKPOINTS,
    MAX_NODES,
    MAX_STALL_MINUTES,
    JobSpec,
    JobSpecError,
    data_location,
)
from stacks.schedule_fields import budget_text
from stacks.user_data import HEREDOC_VERSIONS

# Empty (the on-demand price caps it) or a plain decimal above 0 and below 1000 USD (job_fields.MAX_PRICE_USD).
PRICE_PATTERN = r"^$|^(?=[^1-9]*[1-9])[0-9]{0,3}(\.[0-9]+)?$"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
# Empty (no SSH) or an IPv4 range narrower than the whole internet (/0 refused, as in the job file).
CIDR_PATTERN = rf"^$|^({_OCTET}\.){{3}}{_OCTET}/([1-9]|[12][0-9]|3[0-2])$"
# S3's rules (trainer/storage/names.py): 3-63 of [a-z0-9.-], no "..", not an IP address, no reserved affix.
BUCKET_RULE = "empty, or a bucket name S3 accepts (3-63 of a-z 0-9 . -)"
BUCKET_PATTERN = (r"^$|^(?!.*\.\.)(?![0-9]+(\.[0-9]+){3}$)"
                  rf"(?!{'|'.join(RESERVED_BUCKET_PREFIXES)})(?!.*({'|'.join(RESERVED_BUCKET_SUFFIXES)})$)"
                  r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
DEFAULT_WORKDIR = "/opt/spot-trainer/work"
SINGLE_SUBNET_TYPE = "AWS::EC2::Subnet::Id"
# The type is fixed by the job file's `ami`: each takes one form only, so say which.
IMAGE_DESCRIPTIONS = {
    "AWS::EC2::Image::Id": "AMI id (ami-…); for an SSM path, set capacity.ami to one",
    "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>": "SSM parameter path of the image; for an ami-… id, set "
                                                       "capacity.ami to one",
}
# A key prefix ending in "/" (so "cifar/" never matches "cifar2/"), or empty for the whole bucket.
DATA_PREFIX_PATTERN = r"^$|^[^/\s][^\s]*/$"


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


# Values the agent reads from its environment file must be one line (user data refuses others at boot).
ONE_LINE = r"^[^\r\n]*$"
ONE_LINE_RULE = "one line"
# What user data hands pip as one word: the wheel on S3, a URL, or a requirement (no spaces, no local path).
# Empty (the wheel shipped with the stack), a wheel in S3, a URL, or a requirement pinned to one version.
PACKAGE_PATTERN = (r"^$|^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/\S+\.whl$|^(?!s3:)[a-z+]+://\S+$"
                   r"|^[A-Za-z0-9][^\s/\\=<>!~,]*===?[A-Za-z0-9.+!_-]+$")
# Exactly "builtin", or a command that does not start with the word builtin (`builtin;` exits 0 at once).
COMMAND_PATTERN = r"^builtin$|^(?!builtin(?:[\s;&|#]|$))[^\r\n]*[^\s][^\r\n]*$"


NODES_PATTERN = r"^([0-9]|[1-5][0-9]|6[0-4])$"  # 0..MAX_NODES (64)
MIN_NODES_PATTERN = r"^([1-9]|[1-5][0-9]|6[0-4])$"  # 1..MAX_NODES: a round of zero nodes trains nothing
KEEP_PATTERN = r"^[1-9][0-9]{0,2}$"  # 1..MAX_KEEP_CHECKPOINTS (999)
VOLUME_PATTERN = r"^([89]|[1-9][0-9]{1,3}|1[0-5][0-9]{3}|16[0-2][0-9]{2}|163[0-7][0-9]|1638[0-4])$"  # 8..16384
# The job file's forms (trainer/capacity/policy.py reads them): whole numbers with units d h m s, not zero.
DURATION_PATTERN = r"(?=[0-9dhms]*[1-9])([0-9]+[dhms])+"
UTC_TIMESTAMP_PATTERN = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?Z"
DEADLINE_PATTERN = rf"^$|^{UTC_TIMESTAMP_PATTERN}$|^{DURATION_PATTERN}$"
DURATION_RULE = "a duration like 36h, 90m or 1d12h (units d h m s)"
EMAIL_PATTERN = r"^$|^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$"
STALL_PATTERN = r"^([0-9]|[1-9][0-9]|[1-9][0-9]{2}|1[0-3][0-9]{2}|14[0-3][0-9]|1440)$"  # 0..MAX_STALL_MINUTES
TOTAL_STEPS_PATTERN = r"^$|^[1-9][0-9]{0,14}$"
BUDGET_PATTERN = r"^$|^(?=[0-9.]*[1-9])[0-9]{1,9}(\.[0-9]{1,6})?$"  # schedule_fields.budget_text's form


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
    return {"allowed_pattern": ONE_LINE, "constraint_description": ONE_LINE_RULE} if version in HEREDOC_VERSIONS else {}


def _param(stack: Stack, name: str, label: str, **props: object) -> tuple[str, str, CfnParameter]:
    return name, label, CfnParameter(stack, name, **props)


def add_job_parameters(stack: Stack, job: JobSpec) -> JobParameters:
    run, cap, net, storage, access = job.run, job.capacity, job.network, job.storage, job.access
    location = data_location(run)
    data = (location[0], location[1] + "/" if location[1] else "") if location else ("", "")
    image_type = "AWS::EC2::Image::Id" if AMI_ID.match(cap.ami) else "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    arch = architecture(cap.instance_types[0])  # the job file's types share one, as its image does
    groups: list[tuple[str, list[tuple[str, str, CfnParameter]]]] = [
        ("What to run", [
            _param(stack, "TrainingCommand", "Training command", type="String", default=run.command,
                   allowed_pattern=COMMAND_PATTERN,
                   constraint_description='one line, not empty: exactly "builtin", or your own command',
                   description='"builtin" for the built-in PyTorch trainer, or the shell command that trains'),
            _param(stack, "TrainArguments", "Built-in trainer arguments", type="String", default=run.train_args,
                   allowed_pattern=ONE_LINE, constraint_description=ONE_LINE_RULE,
                   description="Arguments of the built-in trainer (ignored for your own command)"),
            _param(stack, "DataBucket", "Dataset bucket", type="String", default=data[0],
                   allowed_pattern=BUCKET_PATTERN, constraint_description=BUCKET_RULE,
                   description="Empty = no S3 data; else the bucket of the dataset the job reads (read-only "
                               "access)"),
            _param(stack, "DataPrefix", "Dataset key prefix", type="String", default=data[1],
                   allowed_pattern=DATA_PREFIX_PATTERN,
                   constraint_description="empty (the whole bucket), or a key prefix ending in '/', "
                                          "e.g. datasets/cifar/",
                   description="Key prefix of the dataset in that bucket, ending in '/'; empty = the whole bucket"),
            _param(stack, "WorkingDirectory", "Working directory", type="String", default=DEFAULT_WORKDIR,
                   allowed_pattern=r"^/[^\s]*$", constraint_description="an absolute path without spaces",
                   description="Directory on the instance where the job's code lives and the command runs"),
            *_checkpoint_folder(stack, job),
            _param(stack, "SetupCommand", "Setup command", type="String", default=run.setup,
                   description="Optional command run once in the working directory before training",
                   **_setup_constraint(job.userdata_version)),
            _param(stack, "TrainerPackage", "Trainer package", type="String", default=run.trainer_package,
                   allowed_pattern=PACKAGE_PATTERN,
                   constraint_description="empty, s3://bucket/key.whl, a URL, or a pip requirement pinned with ==; "
                   "no spaces, no local path",
                   description="Empty: the runtime shipped with this stack; else an s3:// wheel, URL or name==version"),
        ]),
        ("Capacity", [
            _param(stack, "InstanceTypes", "Instance types", type="String",
                   allowed_pattern=instance_types_pattern(len(cap.instance_types), arch),
                   constraint_description=f"exactly {len(cap.instance_types)} {arch} types, comma-separated, none "
                                          "twice, like g5.xlarge (count and architecture are fixed at synth)",
                   default=",".join(cap.instance_types),
                   description=f"Exactly {len(cap.instance_types)} spot instance types, most preferred first"),
            # A String with a pattern: a Number parameter takes 1.5, which the group refuses at deploy.
            _param(stack, "Nodes", "Number of instances", type="String", default=str(cap.nodes),
                   allowed_pattern=NODES_PATTERN, constraint_description=f"a whole number from 0 to {MAX_NODES}",
                   description="Instances kept running; 0 pauses the job"),
            _param(stack, "Distributed", "Distributed training", type="String", default=str(cap.distributed).lower(),
                   allowed_values=["true", "false"], constraint_description="true or false",
                   description="true: the instances train one model together (torchrun elastic); false: one "
                               "trains, the others stand by"),
            _param(stack, "MinNodes", "Fewest nodes to train", type="String", default=str(cap.min_nodes or cap.nodes),
                   allowed_pattern=MIN_NODES_PATTERN,
                   constraint_description=f"a whole number from 1 to {MAX_NODES}, at most Nodes",
                   description="Distributed: training goes on while this many are up (at most Nodes)"),
            _param(stack, "SpotMaxPrice", "Spot max price (USD/hour)", type="String", default=cap.max_price,
                   allowed_pattern=PRICE_PATTERN,
                   constraint_description="empty, or USD per hour above 0 and below 1000, like 0.45",
                   description="Highest hourly price per instance; empty = the on-demand price"),
            _param(stack, "ImageId", "Machine image (AMI)", type=image_type, default=cap.ami,
                   description=IMAGE_DESCRIPTIONS[image_type]),
        ]),
    ]
    vpc_id = subnets = None
    schedule, notify = job.schedule, job.notify
    alerts = ("Schedule and alerts", [
        _param(stack, "NotifyEmail", "Notification e-mail", type="String", default=notify.email,
               allowed_pattern=EMAIL_PATTERN, constraint_description="empty, or an e-mail address",
               description="Empty = none; else it gets the job's notifications"),
        _param(stack, "StallAlarmMinutes", "Stall alarm (minutes)", type="String", default=str(notify.stall_minutes),
               allowed_pattern=STALL_PATTERN, constraint_description=f"0 to {MAX_STALL_MINUTES}",
               description="Alarm after this long without a step while an instance runs; 0 = none"),
        _param(stack, "Deadline", "Deadline", type="String", default=schedule.deadline,
               allowed_pattern=DEADLINE_PATTERN,
               constraint_description="empty, a UTC time like 2026-12-01T18:00:00Z, or a duration like 36h",
               description="Empty = none; else on-demand while behind the pace that finishes by then"),
        _param(stack, "TotalSteps", "Total steps", type="String",
               default=str(schedule.total_steps) if schedule.total_steps else "",
               allowed_pattern=TOTAL_STEPS_PATTERN, constraint_description="empty, or a whole number above 0",
               description="Steps your own command takes; empty = the built-in trainer's --steps"),
        _param(stack, "MaxSpotWait", "Longest wait for spot", type="String", default=schedule.max_spot_wait,
               allowed_pattern=rf"^$|^{DURATION_PATTERN}$", constraint_description="empty, or " + DURATION_RULE,
               description="Empty = wait for spot; else on-demand after this long without an instance"),
        _param(stack, "DeadlineMargin", "Deadline margin", type="String", default=schedule.margin,
               allowed_pattern=rf"^{DURATION_PATTERN}$", constraint_description=DURATION_RULE,
               description="Kept in hand before the deadline for boot and restore"),
        _param(stack, "BudgetUSD", "Budget (USD)", type="String",
               default=budget_text(schedule.budget_usd) if schedule.budget_usd else "",
               allowed_pattern=BUDGET_PATTERN, constraint_description="empty, or USD above 0 like 50 or 0.25",
               description="Empty = none; else at this spend the job saves and stops (raise it to go on)"),
    ])
    if not net.create:
        # No default when the job leaves the choice to deploy time (console pick or --parameters).
        vpc_id = _param(stack, "VpcId", "VPC", type="AWS::EC2::VPC::Id", default=net.vpc_id or None,
                        description="VPC of the subnets")
        subnets = _subnets_param(stack, job)
        groups.append(("Network", [vpc_id, subnets]))
    groups += [
        alerts,
        ("Storage", [
            _param(stack, "ExistingBucket", "Existing checkpoint bucket", type="String", default=storage.bucket,
                   allowed_pattern=BUCKET_PATTERN, constraint_description=BUCKET_RULE,
                   description="Empty = create one; else a bucket you own (e.g. kept by a destroyed stack): "
                               "training resumes from it"),
            _param(stack, "VolumeSize", "Root volume size (GiB)", type="String", default=str(cap.volume_size),
                   allowed_pattern=VOLUME_PATTERN, constraint_description="a whole number of GiB from 8 to 16384",
                   description="Encrypted gp3 root volume"),
            _param(stack, "KeepCheckpoints", "Checkpoints kept", type="String",
                   default=str(storage.keep_checkpoints), allowed_pattern=KEEP_PATTERN,
                   constraint_description=f"a whole number from 1 to {MAX_KEEP_CHECKPOINTS}",
                   description="How many of the newest checkpoints are kept in S3"),
            # A String with a pattern: a Number parameter takes 1.5, which S3's lifecycle rule refuses.
            _param(stack, "CheckpointVersionRetentionDays", "Replaced checkpoint retention (days)",
                   type="String", default=str(storage.noncurrent_days), allowed_pattern=r"^[1-9][0-9]*$",
                   constraint_description="a whole number of days, 1 or more",
                   description="Days a deleted or overwritten checkpoint object stays recoverable"),
            # AllowedValues: the console offers a list to pick from, and CloudFormation's refusal of any other
            # value names that list, so no ConstraintDescription (the template has no bytes to spare).
            _param(stack, "LogRetentionDays", "Log retention (days)", type="Number",
                   default=str(storage.log_retention_days), allowed_values=[str(d) for d in LOG_RETENTION_DAYS],
                   description="Days CloudWatch keeps the job's logs"),
        ]),
        ("Access", [
            _param(stack, "SshCidr", "SSH source CIDR", type="String", default=access.ssh_cidr,
                   allowed_pattern=CIDR_PATTERN,
                   constraint_description="empty, or an IPv4 range like 203.0.113.0/24, not /0",
                   description="Empty = no SSH (use Session Manager); else the range allowed to port 22"),
            # A String, not AWS::EC2::KeyPair::KeyName: that type rejects the empty "no key" value.
            _param(stack, "KeyPair", "Key pair", type="String", default=access.key_pair,
                   description="Optional EC2 key pair name for SSH"),
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
    )


def _checkpoint_folder(stack: Stack, job: JobSpec) -> list[tuple[str, str, CfnParameter]]:
    """Offered where a command of the user's own runs (from user data v2): the built-in trainer saves where
    it is told, and the CLI's 50 KiB for a template without assets has no room for it."""
    if job.run.command == "builtin" or job.userdata_version in HEREDOC_VERSIONS:
        return []
    return [_param(stack, "CheckpointFolder", "Checkpoint folder", type="String", default=job.run.checkpoint_dir,
                   allowed_pattern=CHECKPOINT_FOLDER_PATTERN, constraint_description=CHECKPOINT_FOLDER_RULE,
                   description="Empty = the agent's own ($CHECKPOINT_DIR); else the folder your command saves its "
                               "checkpoints in, e.g. outputs (from the working directory)")]


# The job-file field each parameter's default comes from (the rest have fixed defaults).
JOB_FIELDS = {
    "TrainingCommand": "run.command", "TrainArguments": "run.train_args", "SetupCommand": "run.setup",
    "TrainerPackage": "run.trainer_package", "InstanceTypes": "capacity.instance_types", "Nodes": "capacity.nodes",
    "Distributed": "capacity.distributed", "MinNodes": "capacity.min_nodes", "SpotMaxPrice": "capacity.max_price",
    "ImageId": "capacity.ami", "VpcId": "network.vpc_id", "Subnets": "network.subnets",
    "NotifyEmail": "notify.email", "StallAlarmMinutes": "notify.stall_minutes", "Deadline": "schedule.deadline",
    "TotalSteps": "schedule.total_steps", "MaxSpotWait": "schedule.max_spot_wait", "DeadlineMargin": "schedule.margin",
    "BudgetUSD": "schedule.budget_usd",
    "ExistingBucket": "storage.bucket", "VolumeSize": "capacity.volume_size",
    "KeepCheckpoints": "storage.keep_checkpoints", "CheckpointVersionRetentionDays": "storage.noncurrent_days",
    "LogRetentionDays": "storage.log_retention_days", "SshCidr": "access.ssh_cidr", "KeyPair": "access.key_pair",
    "CheckpointFolder": "run.checkpoint_dir",
}


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
    fields = {**JOB_FIELDS, "DataBucket": "run.data" if job.run.data else "run.train_args"}
    fields["DataPrefix"] = fields["DataBucket"]
    for name, param in found.items():
        if rule := default_problem(param):
            raise JobSpecError(f"{job.source}: {fields.get(name, name)}: {str(param.default)!r} would be the "
                               f"default of the {name} parameter, which takes {rule}")


def _subnets_param(stack: Stack, job: JobSpec) -> tuple[str, str, CfnParameter]:
    """Several subnets widen the spot pools; a cluster placement group lives in one AZ, so it takes one."""
    default = ",".join(job.network.subnets) or None
    if job.capacity.placement == "cluster":
        return _param(stack, "Subnets", "Subnet", type=SINGLE_SUBNET_TYPE, default=default,
                      description="The one subnet to launch in: a cluster placement group keeps every node in one AZ")
    return _param(stack, "Subnets", "Subnets", type="List<AWS::EC2::Subnet::Id>", default=default,
                  description="Subnets to launch in; several AZs widen the spot pools")
