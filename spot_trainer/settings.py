"""Every setting of a job, once: its job-file field, console parameter, `SPOT_*` name, default and help.

A setting travels from the job file (`[run] grace_seconds = 110`) or a console parameter to the
instance's environment file (`SPOT_GRACE_SECONDS=110`), which the agent reads. The job file's
sections, the console's parameters, the agent's configuration and the job-file reference
(docs/job-file.md) are all read from this table, so a setting is named, defaulted and explained here
and nowhere else; the code that acts on a setting checks its meaning.

Torch-free and import-light: stacks/ imports it as `spot_trainer.settings`. Long by design: it is one
table, and a setting split from its neighbours would be a second place to look.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from . import setting_patterns as pattern
from .aws_names import JOB_NAME_RULE

MAX_NODES = 64  # instances of one job
MAX_KEEP_CHECKPOINTS = 999
MAX_STALL_MINUTES = 1440  # an alarm looks back at most one day at one-minute periods
GRACE_SECONDS = 110  # run.grace_seconds when the job file leaves it out
GRACE_SECONDS_RANGE = (10, 7200)  # what a job file may ask for
SAVE_WARN_SECONDS = 1800
SAVE_WARN_SECONDS_RANGE = (60, 86400)
VOLUME_GIB_RANGE = (8, 16384)
# Waits that stretch the grace period by what follows the command's save: the termination hook's, for
# the final upload (the stack), and systemd's stop timeout, for the agent's upload and hand-back (user
# data's unit; bash drops the grace period's fraction, hence the odd second).
HOOK_ALLOWANCE_SECONDS = 300
STOP_TIMEOUT_ALLOWANCE_SECONDS = 31
# Several nodes: how long, beyond the grace period, a node whose command finished waits for the node that
# publishes to have its final checkpoint and outputs in S3 (the publisher's retries of its final upload).
FINAL_UPLOAD_ALLOWANCE_SECONDS = 600.0
# A spot notice: the instance goes at the notice's own `time`, two minutes after it appears; what the
# agent keeps of that for itself (agent/watches/notice_deadline.py acts on these, the stack warns with them).
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
NOTICE_SECONDS = 120.0  # a notice that names no usable time: reclaimed two minutes after it appeared
AFTER_UPLOAD_SECONDS = 3.0  # the lease handed back and the interruption recorded: a few small S3 writes
UPLOAD_SAFETY = 1.5  # the emergency checkpoint may be larger, and S3 slower, than the last one
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
                      2557, 2922, 3288, 3653)  # CloudWatch's values
NO_DEFAULT: Any = object()  # the agent cannot start without it (SPOT_JOB, SPOT_BUCKET, SPOT_COMMAND)
SAME: Any = object()  # the agent's default is the job file's


class ConsoleGroup(StrEnum):
    """The console's groups of parameters, in the order a person fills them in; each value is its title."""

    RUN = "What to run"
    CAPACITY = "Capacity"
    NETWORK = "Network"
    SCHEDULE = "Schedule and alerts"
    STORAGE = "Storage"
    ACCESS = "Access"


@dataclass(frozen=True)
class ConsoleParameter:
    """A CloudFormation parameter: where the console shows it (its group, and its place in the group: the
    table is in the job file's order, not the console's), how and what it accepts. An empty pattern with
    `pattern_at_synth` is made when the template is (it depends on the job: types' count, version)."""

    name: str
    group: ConsoleGroup
    place: int
    label: str
    description: str
    pattern: str = ""
    rule: str = ""  # the ConstraintDescription: the pattern in words
    type: str = "String"
    values: tuple[str, ...] = ()
    pattern_at_synth: bool = False


@dataclass(frozen=True)
class Floor:
    """The least the agent acts on, looser than the job file's range (tests and the local spot cloud use
    shorter times than a job may); `open`: the value itself is refused too."""

    value: float
    open: bool = False

    def admits(self, number: float) -> bool:
        return number > self.value if self.open else number >= self.value


NOT_NEGATIVE, POSITIVE, AT_LEAST_ONE = Floor(0), Floor(0, open=True), Floor(1)


@dataclass(frozen=True)
class Setting:
    field: str  # "section.key" in the job file ("" for one set by the stack or the instance)
    help: str  # one line for the job-file reference
    default: Any = ""  # the job file's default (for a field)
    env: str = ""  # the SPOT_* name in the instance's environment file ("" when none)
    attr: str = ""  # the agent's configuration attribute that reads `env` ("" when the agent does not)
    agent_default: Any = SAME  # when the agent's own differs (a folder of its own, seconds as float)
    console: tuple[ConsoleParameter, ...] = ()
    default_text: str = ""  # the reference's words for a default that is not a literal
    header_when_set: bool = False  # in the instance's header only when the job sets it (bytes are scarce)
    bounds: tuple[int, int] | None = None  # the least and most a job file may give (both allowed)
    agent_floor: Floor | None = None  # the least the agent acts on
    tuning: bool = False  # set only by tests and the local spot cloud (documented in docs/development.md)

    @property
    def section(self) -> str:
        return self.field.rpartition(".")[0]

    @property
    def key(self) -> str:
        return self.field.rpartition(".")[2]

    @property
    def agent_value(self) -> Any:
        return self.default if self.agent_default is SAME else self.agent_default


def _param(name: str, group: ConsoleGroup, place: int, label: str, description: str,
           **rest: Any) -> tuple[ConsoleParameter, ...]:
    return (ConsoleParameter(name, group, place, label, description, **rest),)


SETTINGS: tuple[Setting, ...] = (
    # ---- top level ----
    Setting("name", f"the job's name: {JOB_NAME_RULE}; its S3 prefix, log group and stack suffix",
            default_text="the job file's name, less `.toml`", env="SPOT_JOB", attr="job", agent_default=NO_DEFAULT),
    Setting("description", 'the stack\'s description, after "Spot Trainer job NAME: "'),
    Setting("userdata_version", "the bootstrap script in `userdata/<version>/` (see [User data versions]"
            "(architecture.md#user-data-versions-and-what-each-supports))", "v2", env="SPOT_USERDATA_VERSION"),
    # ---- [run] ----
    Setting("run.command", 'the built-in trainer, or your own command on one line, run by bash, e.g. `"python '
            'train.py"` (a flag only when a file exists: see [One checkpoint file](own-code.md#one-checkpoint-file-'
            'rewritten-in-place))', "builtin",
            env="SPOT_COMMAND", attr="command", agent_default=NO_DEFAULT, console=_param(
                "TrainingCommand", ConsoleGroup.RUN, 1, "Training command",
                '"builtin" for the built-in PyTorch trainer, or the shell command that trains',
                pattern=pattern.COMMAND, rule='one line, not empty: exactly "builtin", or your own command')),
    Setting("run.train_args", "the built-in trainer's arguments (ignored for your own command)",
            env="SPOT_TRAIN_ARGS", attr="train_args", console=_param(
                "TrainArguments", ConsoleGroup.RUN, 2, "Built-in trainer arguments",
                "Arguments of the built-in trainer (ignored for your own command)",
                pattern=pattern.ONE_LINE, rule=pattern.ONE_LINE_RULE)),
    Setting("run.workdir", "a local directory shipped with the job (a CDK asset) and unpacked on each instance; "
            "the console's `WorkingDirectory` is where it lives there", default_text='`""` (ships nothing)'),
    Setting("run.checkpoint_dir", "the folder your own script already saves into (see [Your own code]"
            "(own-code.md#a-script-that-saves-into-a-folder-of-its-own)); the console offers it for your own "
            "command only",
            default_text='`""` (the agent\'s, as `$CHECKPOINT_DIR`)', env="SPOT_CHECKPOINT_DIR",
            attr="checkpoint_dir", agent_default="/opt/spot-trainer/checkpoints", header_when_set=True, console=_param(
                "CheckpointFolder", ConsoleGroup.RUN, 6, "Checkpoint folder",
                "Empty = the agent's own ($CHECKPOINT_DIR); else the folder your command saves its checkpoints "
                "in, e.g. outputs (from the working directory)",
                pattern_at_synth=True)),
    Setting("run.setup", "a command run in the working directory before training, with the job's Python first on "
            "`PATH`: `pip install torch==2.5.1` pins torch (see [Which torch runs your script]"
            "(your-own-script.md#5-which-torch-runs-your-script)); on every instance that builds the environment, "
            "so not on a replacement that restores it from `env_cache` (files it writes elsewhere need `env_cache = "
            "false`)", env="SPOT_SETUP_COMMAND",
            console=_param("SetupCommand", ConsoleGroup.RUN, 7, "Setup command",
                           "Optional command run once in the working directory before training",
                           pattern_at_synth=True)),
    Setting("run.data", "the `s3://bucket/prefix` the job reads; read-only access is granted",
            default_text="`\"\"` (the built-in trainer's `--data s3://…`)", console=(
                ConsoleParameter("DataBucket", ConsoleGroup.RUN, 3, "Dataset bucket",
                                 "Empty = no S3 data; else the bucket of the dataset the job reads (read-only "
                                 "access)", pattern=pattern.BUCKET, rule=pattern.BUCKET_RULE),
                ConsoleParameter("DataPrefix", ConsoleGroup.RUN, 4, "Dataset key prefix",
                                 "Key prefix of the dataset in that bucket, ending in '/'; empty = the whole bucket",
                                 pattern=pattern.DATA_PREFIX,
                                 rule="empty (the whole bucket), or a key prefix ending in '/', e.g. datasets/cifar/"),
            )),
    Setting("run.torch", "the torch the job needs, e.g. `torch==2.13.0`: installed over the image's when its own "
            "does not satisfy it", default_text='`""` (the image\'s torch; `torch==2.13.0` on an image without one)',
            env="SPOT_TORCH_SPEC", header_when_set=True),
    Setting("run.env_cache", "keep the job's built environment (Python, torch, runtime, what `setup` installs) in "
            "its bucket, so a replacement restores it instead of installing", True, env="SPOT_ENV_CACHE",
            header_when_set=True),
    Setting("run.trainer_package", "what pip installs on each instance: `s3://bucket/key.whl`, a URL, or "
            "`name==X.Y.Z`", default_text='`""` (this checkout\'s runtime, shipped with the stack)',
            env="SPOT_TRAINER_PACKAGE", console=_param(
                "TrainerPackage", ConsoleGroup.RUN, 8, "Trainer package",
                "Empty: the runtime shipped with this stack; else an s3:// wheel, URL or name==version",
                pattern=pattern.PACKAGE, rule="empty, s3://bucket/key.whl, a URL, or a pip requirement pinned "
                "with ==; no spaces, no local path")),
    Setting("run.checkpoint_files", 'the entries of the checkpoint folder that are your script\'s checkpoint, when '
            'it keeps one under a fixed name the agent does not know, e.g. `["model.keras"]` or `["weights"]`: they '
            'go up together at the step they hold inside, or by when they were written (see [One checkpoint '
            'file](own-code.md#one-checkpoint-file-rewritten-in-place))', (),
            default_text="`[]` (the usual names are known)",
            env="SPOT_CHECKPOINT_FILES", attr="checkpoint_files", agent_default="", header_when_set=True),
    Setting("run.secrets", 'secrets put into the command\'s environment at start, by reference: `["HF_TOKEN='
            'ssm:/team/hf-token", "WANDB_API_KEY=secretsmanager:wandb-key"]`; the instances may read exactly these '
            '(see [Secrets](your-own-script.md#6-secrets))', (), default_text="`[]` (none)", env="SPOT_SECRETS",
            attr="secrets", agent_default="", header_when_set=True),
    Setting("run.stop_signal", "the signal the command gets to save and stop: `SIGTERM`, `SIGINT`, `SIGUSR1` or "
            "`SIGUSR2`", "SIGTERM", env="SPOT_STOP_SIGNAL", attr="stop_signal"),
    Setting("run.grace_seconds", "how long the command may take for its emergency checkpoint (up to "
            f"{GRACE_SECONDS_RANGE[1]})", GRACE_SECONDS, env="SPOT_GRACE_SECONDS", attr="grace_seconds",
            agent_default=float(GRACE_SECONDS), bounds=GRACE_SECONDS_RANGE, agent_floor=NOT_NEGATIVE),
    Setting("run.restart_budget", "failures before the job is marked FAILED and scaled to zero", 3,
            env="SPOT_RESTART_BUDGET", attr="restart_budget", agent_floor=NOT_NEGATIVE),
    Setting("run.save_warn_seconds", "warn once when the command has saved no checkpoint the agent recognises this "
            "long after it starts ({} to {})".format(*SAVE_WARN_SECONDS_RANGE), SAVE_WARN_SECONDS,
            env="SPOT_SAVE_WARN_SECONDS", attr="save_warn_seconds", agent_default=float(SAVE_WARN_SECONDS),
            header_when_set=True, bounds=SAVE_WARN_SECONDS_RANGE, agent_floor=POSITIVE),
    Setting("run.react_to_rebalance", "also checkpoint and leave on rebalance recommendations", False,
            env="SPOT_REACT_TO_REBALANCE", attr="react_to_rebalance"),
    # ---- [capacity] ----
    Setting("capacity.instance_types", "the types the spot group may launch", ("g5.xlarge", "g6.xlarge", "g4dn.xlarge"),
            console=_param("InstanceTypes", ConsoleGroup.CAPACITY, 1, "Instance types", "", pattern_at_synth=True)),
    Setting("capacity.nodes", "instances; with more than one, one trains and the others stand by and take over "
            "on interruption", 1, env="SPOT_MAX_NODES", attr="max_nodes", console=_param(
                # A String with a pattern: a Number parameter takes 1.5, which the group refuses at deploy.
                "Nodes", ConsoleGroup.CAPACITY, 2, "Number of instances", "Instances kept running; 0 pauses the job",
                pattern=pattern.NODES, rule=f"a whole number from 0 to {MAX_NODES}")),
    Setting("capacity.distributed", "`true`: the nodes train one model together (torchrun elastic, at least 2)",
            False, env="SPOT_DISTRIBUTED", attr="distributed", console=_param(
                "Distributed", ConsoleGroup.CAPACITY, 3, "Distributed training",
                "true: the instances train one model together (torchrun elastic); false: one trains, the others "
                "stand by", values=("true", "false"), rule="true or false")),
    Setting("capacity.min_nodes", "distributed only: training goes on while this many are up", 0,
            default_text="the value of `nodes`", env="SPOT_MIN_NODES", attr="min_nodes", agent_default=1,
            console=_param("MinNodes", ConsoleGroup.CAPACITY, 4, "Fewest nodes to train",
                           "Distributed: training goes on while this many are up (at most Nodes)",
                           pattern=pattern.MIN_NODES, rule=f"a whole number from 1 to {MAX_NODES}, at most Nodes")),
    Setting("capacity.placement", '`"cluster"`: one cluster placement group, so one AZ and one subnet'),
    Setting("capacity.max_price", "USD/hour per instance", default_text="none: the on-demand price caps it",
            console=_param("SpotMaxPrice", ConsoleGroup.CAPACITY, 5, "Spot max price (USD/hour)",
                           "Highest hourly price per instance; empty = the on-demand price", pattern=pattern.PRICE,
                           rule="empty, or USD per hour above 0 and below 1000, like 0.45")),
    # The PyTorch DLAMI: its env (/opt/pytorch/bin/python) already has torch and CUDA, so no instance
    # installs them. Release notes (python_location, Ubuntu 24.04, x86_64, G4dn to P6-B200):
    # https://docs.amazonaws.cn/dlami/latest/devguide/aws-deep-learning-ami-gpupt212oss-ul2404-2026-08-24.html
    # and the parameter's form: https://docs.aws.amazon.com/dlami/latest/devguide/find-dlami-id.html
    Setting("capacity.regions", 'the regions the job may train in, home first, e.g. `["us-east-1", "us-west-2"]`: '
            "one stack each; the job trains in one region at a time", (),
            default_text="the deploy region alone"),
    Setting("capacity.region_wait", "several regions: how long the active region may run no instance before the "
            "job moves", "15m"),
    Setting("capacity.ami", "an SSM parameter path or an AMI id",
            "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.12-ubuntu-24.04/latest/ami-id",
            default_text="the PyTorch GPU DLAMI's parameter (below)",
            console=_param("ImageId", ConsoleGroup.CAPACITY, 6, "Machine image (AMI)", "", pattern_at_synth=True)),
    Setting("capacity.volume_size", "the root volume in GiB", 100, bounds=VOLUME_GIB_RANGE, console=_param(
        "VolumeSize", ConsoleGroup.STORAGE, 2, "Root volume size (GiB)", "Encrypted gp3 root volume",
        pattern=pattern.VOLUME,
        rule="a whole number of GiB from {} to {}".format(*VOLUME_GIB_RANGE))),
    Setting("capacity.root_device", "the root volume's device name (`jobs/example.toml` uses `/dev/xvda`)",
            "/dev/sda1"),
    # ---- [network] ----
    Setting("network.subnets", '`"create"`: the stack makes its own VPC; `"parameter"`: VPC and subnets chosen at '
            'deploy time; or a list `["subnet-…"]`', (), default_text='`"create"`',
            console=_param("Subnets", ConsoleGroup.NETWORK, 2, "Subnets", "", pattern_at_synth=True)),
    Setting("network.vpc_id", 'with a list of subnets, the VPC they lie in (`"vpc-…"`)',
            console=_param("VpcId", ConsoleGroup.NETWORK, 1, "VPC", "VPC of the subnets", type="AWS::EC2::VPC::Id")),
    # ---- [schedule] ----
    Setting("schedule.deadline", '`"2026-12-01T18:00:00Z"` (UTC), or from the job\'s first start: `"36h"`, '
            '`"1d12h"`', default_text='`""` (none)', env="SPOT_DEADLINE", attr="deadline", console=_param(
                "Deadline", ConsoleGroup.SCHEDULE, 3, "Deadline",
                "Empty = none; else on-demand while behind the pace that finishes by then",
                pattern=pattern.DEADLINE,
                rule="empty, a UTC time like 2026-12-01T18:00:00Z, or a duration like 36h")),
    Setting("schedule.total_steps", "own commands: the job's size (the built-in trainer uses its `--steps`)", 0,
            env="SPOT_TOTAL_STEPS", attr="total_steps", agent_floor=NOT_NEGATIVE, console=_param(
                "TotalSteps", ConsoleGroup.SCHEDULE, 4, "Total steps",
                "Steps your own command takes; empty = the built-in trainer's --steps",
                pattern=pattern.TOTAL_STEPS, rule="empty, or a whole number above 0")),
    Setting("schedule.max_spot_wait", 'e.g. `"2h"`: no spot instance running this long → on-demand',
            default_text='`""` (wait for spot)', env="SPOT_MAX_SPOT_WAIT", console=_param(
                "MaxSpotWait", ConsoleGroup.SCHEDULE, 5, "Longest wait for spot",
                "Empty = wait for spot; else on-demand after this long without an instance",
                pattern=pattern.OPTIONAL_DURATION, rule="empty, or " + pattern.DURATION_RULE)),
    Setting("schedule.margin", "kept in hand before the deadline for boot and restore", "30m",
            env="SPOT_DEADLINE_MARGIN", attr="deadline_margin", console=_param(
                "DeadlineMargin", ConsoleGroup.SCHEDULE, 6, "Deadline margin",
                "Kept in hand before the deadline for boot and restore",
                pattern=pattern.DURATION, rule=pattern.DURATION_RULE)),
    Setting("schedule.budget_usd", "spending cap: at it the job saves and stops", 0.0, default_text="none",
            env="SPOT_BUDGET_USD", attr="budget_usd", agent_floor=NOT_NEGATIVE, console=_param(
                "BudgetUSD", ConsoleGroup.SCHEDULE, 7, "Budget (USD)",
                "Empty = none; else at this spend the job saves and stops (raise it to go on)",
                pattern=pattern.BUDGET, rule="empty, or USD above 0 like 50 or 0.25")),
    # ---- [notify] ----
    Setting("notify.email", "this address gets every notification (confirm SNS's first mail)",
            default_text='`""` (nobody)', console=_param(
                "NotifyEmail", ConsoleGroup.SCHEDULE, 1, "Notification e-mail",
                "Empty = none; else it gets the job's notifications",
                pattern=pattern.EMAIL, rule="empty, or an e-mail address")),
    Setting("notify.stall_minutes", "alarm after this long without a step while an instance runs; `0` = none", 30,
            env="SPOT_STALL_MINUTES", attr="stall_minutes", agent_default=0.0, agent_floor=NOT_NEGATIVE, console=_param(
                "StallAlarmMinutes", ConsoleGroup.SCHEDULE, 2, "Stall alarm (minutes)",
                "Alarm after this long without a step while an instance runs; 0 = none", pattern=pattern.STALL,
                rule=f"0 to {MAX_STALL_MINUTES}")),
    Setting("notify.restart_on_stall", "also stop and restart a hung command (single node)", False,
            env="SPOT_RESTART_ON_STALL", attr="restart_on_stall", header_when_set=True),
    # ---- [access] ----
    Setting("access.ssh_cidr", "the source range allowed to SSH in; needs a key pair",
            default_text='`""` (no SSH ingress)', console=_param(
                "SshCidr", ConsoleGroup.ACCESS, 1, "SSH source CIDR",
                "Empty = no SSH (use Session Manager); else the range allowed to port 22",
                pattern=pattern.CIDR, rule="empty, or an IPv4 range like 203.0.113.0/24, not /0")),
    # A String, not AWS::EC2::KeyPair::KeyName: that type rejects the empty "no key" value.
    Setting("access.key_pair", "the EC2 key pair",
            console=_param("KeyPair", ConsoleGroup.ACCESS, 2, "Key pair", "Optional EC2 key pair name for SSH")),
    # ---- [storage] ----
    Setting("storage.bucket", "a bucket you already have", default_text='`""` (the stack creates the bucket)',
            console=_param("ExistingBucket", ConsoleGroup.STORAGE, 1, "Existing checkpoint bucket",
                           "Empty = create one; else a bucket you own (e.g. kept by a destroyed stack): training "
                           "resumes from it", pattern=pattern.BUCKET, rule=pattern.BUCKET_RULE)),
    Setting("storage.keep_checkpoints", "checkpoints kept", 3, env="SPOT_KEEP_CHECKPOINTS", attr="keep_checkpoints",
            agent_floor=AT_LEAST_ONE, console=_param(
                "KeepCheckpoints", ConsoleGroup.STORAGE, 3, "Checkpoints kept",
                "How many of the newest checkpoints are kept in S3",
                pattern=pattern.KEEP, rule=f"a whole number from 1 to {MAX_KEEP_CHECKPOINTS}")),
    # A String with a pattern: a Number parameter takes 1.5, which S3's lifecycle rule refuses.
    Setting("storage.noncurrent_days", "how long replaced checkpoints stay recoverable", 30, console=_param(
        "CheckpointVersionRetentionDays", ConsoleGroup.STORAGE, 4, "Replaced checkpoint retention (days)",
        "Days a deleted or overwritten checkpoint object stays recoverable", pattern=pattern.DAYS,
        rule="a whole number of days, 1 or more")),
    # AllowedValues: the console offers a list to pick from, and CloudFormation's refusal of any other value
    # names that list, so no ConstraintDescription (the template has no bytes to spare).
    Setting("storage.log_retention_days", "log retention", 30, console=_param(
        "LogRetentionDays", ConsoleGroup.STORAGE, 5, "Log retention (days)", "Days CloudWatch keeps the job's logs",
        type="Number", values=tuple(map(str, LOG_RETENTION_DAYS)))),
    # ---- set by the stack at deploy time ----
    Setting("", "the job's checkpoint bucket: the stack's own, or `storage.bucket`", env="SPOT_BUCKET",
            attr="bucket", agent_default=NO_DEFAULT),
    Setting("", "the stack's name", env="SPOT_STACK"),
    Setting("", "the stack's region", "us-east-1", env="SPOT_REGION", attr="region"),
    Setting("", "several regions: each listed region's checkpoint bucket, home first (`region=bucket,…`): the "
            "lease is kept in home's, and a start restores the newest step from whichever holds it",
            env="SPOT_JOB_BUCKETS", attr="job_buckets"),
    Setting("", "the job's Auto Scaling group", env="SPOT_ASG_NAME", attr="asg_name"),
    Setting("", "the group's termination hook, completed once the emergency checkpoint is safe",
            env="SPOT_LIFECYCLE_HOOK", attr="lifecycle_hook"),
    Setting("", "the job's CloudWatch log group", env="SPOT_LOG_GROUP", attr="log_group"),
    Setting("", "the job's SNS topic ARN; empty: no notifications", env="SPOT_NOTIFY_TOPIC", attr="notify_topic"),
    Setting("", "where the job's code (`run.workdir`) is unpacked and the command runs", "/opt/spot-trainer/work",
            env="SPOT_WORKDIR", attr="workdir", agent_default="", console=_param(
                "WorkingDirectory", ConsoleGroup.RUN, 5, "Working directory",
                "Directory on the instance where the job's code lives and the command runs",
                pattern=pattern.ABSOLUTE_PATH, rule="an absolute path without spaces")),
    Setting("", "the job's code in S3 (`run.workdir` shipped as an asset)", env="SPOT_CODE_URI"),
    # ---- the agent's own: tests and the local spot cloud tune those marked `tuning` ----
    Setting("", "how often the agent polls for notices and progress (seconds)", 5.0, env="SPOT_POLL_SECONDS",
            attr="poll_seconds", agent_floor=POSITIVE, tuning=True),
    Setting("", "how long the job lease lasts unrenewed (seconds; above twice the poll)", 60.0,
            env="SPOT_LEASE_TTL_SECONDS", attr="lease_ttl_seconds", tuning=True),
    Setting("", "this instance's id (user data writes the metadata service's)", env="SPOT_INSTANCE_ID",
            attr="instance_id"),
    Setting("", "the CloudWatch namespace of the job's metrics", "SpotTrainer", env="SPOT_METRICS_NAMESPACE",
            attr="metrics_namespace"),
    Setting("", "how often status.json is refreshed while training (seconds)", 15.0, env="SPOT_STATUS_INTERVAL",
            attr="status_interval_seconds", agent_floor=POSITIVE, tuning=True),
    Setting("", "user data's log file, forwarded to the log stream when the agent starts", env="SPOT_BOOTSTRAP_LOG",
            attr="bootstrap_log"),
    Setting("", "workers per node (one per GPU)", 1, env="SPOT_PROCS_PER_NODE", attr="procs_per_node",
            agent_floor=AT_LEAST_ONE),
    Setting("", "this node's address for its peers (default: the metadata service's local-ipv4)",
            env="SPOT_LOCAL_ADDR", attr="local_addr", tuning=True),
    Setting("", "after min_nodes joined, how long a round waits for more (seconds)", 15.0,
            env="SPOT_RDZV_LAST_CALL_SECONDS", attr="rdzv_last_call_seconds", agent_floor=NOT_NEGATIVE, tuning=True),
    # A node that stops heartbeating is dropped from the rendezvous after 3 intervals; each beat is a
    # conditional PUT of the state object (3 nodes at 5 s: about 52,000 PUTs a day, $0.26).
    Setting("", "the rendezvous heartbeat (seconds)", 5.0, env="SPOT_RDZV_KEEP_ALIVE_SECONDS",
            attr="rdzv_keep_alive_seconds", agent_floor=AT_LEAST_ONE, tuning=True),
    Setting("", "how often this instance's record (for its cost) is refreshed (seconds)", 60.0,
            env="SPOT_HEARTBEAT_SECONDS", attr="heartbeat_seconds", agent_floor=POSITIVE, tuning=True),
    Setting("", "how often the deadline is decided (seconds)", 30.0, env="SPOT_DEADLINE_CHECK_SECONDS",
            attr="deadline_check_seconds", agent_floor=POSITIVE, tuning=True),
    Setting("", "how often the spend is read for the budget (seconds)", 60.0, env="SPOT_BUDGET_CHECK_SECONDS",
            attr="budget_check_seconds", agent_floor=POSITIVE, tuning=True),
    *(Setting("", help, env=name) for name, help in (
        # ---- read by the command's processes ----
        ("SPOT_AUTO_RESUME", "`off`: the agent does not reach into the command's Trainer (resume, stop callback)"),
        ("SPOT_COLLECTIVE_TIMEOUT", "the torch collective timeout of the built-in trainer on several nodes (seconds)"),
        ("SPOT_DATA_CACHE", "the built-in trainer's local copy of its S3 data"),
    )),
    *(Setting("", help, env=name, tuning=True) for name, help in (
        # ---- read by user data or the local spot cloud's stand-ins, set by tests ----
        ("SPOT_ROOT", "the runtime's folder on the instance"),
        ("SPOT_BASE_PYTHON", "the Python user data builds the runtime's environment with"),
        ("SPOT_PYTHON_CANDIDATES", "the Python interpreters user data tries, in order"),
        ("SPOT_PIP_ARGS", "extra arguments for user data's pip"),
        ("SPOT_WAIT", "user data's bound on a wait (seconds)"),
        ("SPOT_LAUNCHED_AT", "when the instance was launched (epoch seconds), for its cost"),
        ("SPOT_RETRY_ATTEMPTS", "how often user data tries a download"),
        ("SPOT_RETRY_BASE_MS", "user data's first pause between retries (ms)"),
        ("SPOT_RETRY_MAX_MS", "user data's longest pause between retries (ms)"),
        ("SPOT_RESTART_SEC", "systemd's pause before restarting the agent (seconds)"),
        ("SPOT_CURL_MAX_TIME", "user data's bound on one download (seconds)"),
        ("SPOT_CURL_CONNECT_TIMEOUT", "user data's bound on connecting for a download (seconds)"),
        ("SPOT_AWS_CLI", "the aws CLI user data calls"),
        ("SPOT_PRICE_TRACE", "a local spot price trace instead of the price history (local spot cloud)"),
        ("SPOT_FAKE_GPU_COUNT", "the local nvidia-smi stand-in's GPU count"),
        ("SPOT_FAKE_GPU_NAME", "the local nvidia-smi stand-in's GPU name"),
        ("SPOT_FAKE_GPU_MEMORY_MIB", "the local nvidia-smi stand-in's GPU memory (MiB)"),
    )),
)


def setting(field: str) -> Setting:
    """The setting of a job-file field ("run.grace_seconds")."""
    return _BY_FIELD[field]


def env_setting(name: str) -> Setting:
    """The setting of a SPOT_* name."""
    return _BY_ENV[name]


def console_parameter(name: str) -> ConsoleParameter:
    return _BY_PARAMETER[name][1]


def setting_of_parameter(name: str) -> Setting:
    """The setting a console parameter carries."""
    return _BY_PARAMETER[name][0]


def field_of_parameter(name: str) -> str:
    """The job-file field a console parameter's default comes from ("" for one with a fixed default)."""
    return setting_of_parameter(name).field


def console_parameters() -> list[ConsoleParameter]:
    """Every console parameter, in the console's order: by group, then by place in the group."""
    groups = list(ConsoleGroup)
    return sorted((p for _, p in _BY_PARAMETER.values()), key=lambda p: (groups.index(p.group), p.place))


def env_of(field: str) -> str:
    return setting(field).env


def section_fields(section: str) -> list[Setting]:
    return [s for s in SETTINGS if s.field and s.section == section]


def agent_env_names() -> dict[str, str]:
    """SPOT_* name → the agent configuration's attribute, for every setting the agent reads."""
    return {s.env: s.attr for s in SETTINGS if s.attr}


def agent_default(attr: str) -> Any:
    return _BY_ATTR[attr].agent_value


_BY_FIELD = {s.field: s for s in SETTINGS if s.field}
_BY_ENV = {s.env: s for s in SETTINGS if s.env}
_BY_ATTR = {s.attr: s for s in SETTINGS if s.attr}
_BY_PARAMETER = {p.name: (s, p) for s in SETTINGS for p in s.console}
