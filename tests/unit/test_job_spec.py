"""Job files: every example loads; every bad field is one line naming the field and the expected form."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from stacks.job.instance_types import architecture, instance_type_problem
from stacks.job.spec import JOBS_DIR, JobSpecError, RunSpec, data_location
from stacks.job_file import load_job, parse_job

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = tomllib.loads((JOBS_DIR / "example.toml").read_text())


def with_change(section: str | None, key: str, value: object) -> dict:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in EXAMPLE.items()}
    target = data.setdefault(section, {}) if section else data
    target[key] = value
    return data


def with_changes(section: str, **values: object) -> dict:
    return with_change(None, section, {**EXAMPLE.get(section, {}), **values})


def distributed(**values: object) -> dict:
    """The example as a three-node distributed job, with `values` changed in [capacity]."""
    return with_changes("capacity", distributed=True, nodes=3, **values)


@pytest.mark.parametrize("job", sorted(p.stem for p in JOBS_DIR.glob("*.toml")))
def test_every_shipped_job_loads(job: str) -> None:
    spec = load_job(job)
    assert spec.name == job and spec.stack_name == f"SpotTrainer-{job}"


def test_example_defaults_and_values() -> None:
    spec = load_job("example")
    assert spec.run.command == "builtin" and "--model resnet" in spec.run.train_args
    assert spec.capacity.instance_types == ("c7i.xlarge", "c6i.xlarge", "m6i.xlarge")
    assert spec.network.create is False and spec.userdata_version == "v2"
    assert spec.access.ssh_cidr == "" and spec.storage.log_retention_days == 14


def test_a_path_works_as_well_as_a_name(tmp_path: Path) -> None:
    job = tmp_path / "mine.toml"
    job.write_text('[run]\ncommand = "python train.py"\n')
    spec = load_job(str(job))
    assert spec.name == "mine" and spec.run.command == "python train.py" and spec.network.create


BAD_CASES = [
    (with_change(None, "colour", "blue"), "colour: unknown key"),
    (with_change("run", "commnd", "x"), "run.commnd: unknown key: did you mean command? (known: command, "),
    (with_change("capacity", "budget_usd", 40), "capacity.budget_usd: unknown key in [capacity]: it belongs in "
     "[schedule] ([schedule] budget_usd = …)"),
    (with_change(None, "nodes", 2), "nodes: unknown key at the top level: it belongs in [capacity] "
     "([capacity] nodes = …)"),
    (with_change(None, "descripton", "x"), "descripton: unknown key: did you mean description? (known: access, "),
    (with_change(None, "name", "Bad_Name"), "name: 'Bad_Name' must be 2-32 lowercase"),
    (with_change("run", "command", "  "), "run.command: missing"),
    (with_change("run", "command", "builtin "), "run.command: 'builtin ' has leading or trailing spaces"),
    (with_change("run", "command", "python train.py --name 'x"), "run.command: cannot be parsed as shell words"),
    (with_change("run", "train_args", "--model 'lm"), "run.train_args: cannot be parsed as shell words"),
    (with_change("run", "command", "python a.py\npython b.py"), "run.command: must be one line"),
    (with_change("run", "train_args", "--steps 10\r"), "run.train_args: must be one line"),
    (with_change("run", "command", "builtin;"), "run.command: 'builtin;': the built-in trainer is exactly"),
    (with_change("run", "command", "builtin # the default"), "run.command: 'builtin # the default': the built-in"),
    (with_change("run", "command", "python train.py\u0000 --fast"), "run.command: holds a control character"),
    (with_change("capacity", "instance_types", ["g5.xlarge", "banana"]),
     "capacity.instance_types: 'banana' is not an instance type"),
    (with_change("capacity", "instance_types", ["zz9.xlarge"]),
     "capacity.instance_types: 'zz9.xlarge' has unknown instance family"),
    (with_change("capacity", "instance_types", []), "capacity.instance_types: needs at least one"),
    (with_change("capacity", "instance_types", ["g5.xlarge", "g5g.xlarge"]),
     "capacity.instance_types: mixes x86_64 (g5.xlarge) and arm64 (g5g.xlarge) types: one image cannot boot both"),
    (with_change("capacity", "instance_types", ["c7gn.xlarge", "m7i.xlarge", "t4g.large"]),
     "capacity.instance_types: mixes x86_64 (m7i.xlarge) and arm64 (c7gn.xlarge)"),
    (with_change("capacity", "instance_types", ["g5g.xlarge"]),
     "is an x86_64 image but the instance types are arm64"),
    (with_change("capacity", "instance_types", "g5.xlarge"), "capacity.instance_types: expected a list of strings"),
    (with_change("capacity", "max_price", -1), "capacity.max_price: expected a positive price"),
    (with_change("capacity", "max_price", "cheap"), "capacity.max_price: expected USD per hour"),
    (with_change("capacity", "max_price", float("inf")), "capacity.max_price: 'inf' USD/hour is beyond any"),
    (with_change("capacity", "max_price", 1e20), "capacity.max_price: '1e+20' USD/hour is beyond any"),
    (with_change("capacity", "max_price", "0.45 "), "capacity.max_price: expected a plain decimal like 0.45"),
    (with_change("capacity", "root_device", ""), "capacity.root_device: expected a device name like /dev/sda1"),
    (with_change("run", "setup", "pip install 'x"), "run.setup: cannot be parsed as shell words"),
    (with_change("run", "torch", "torch 2.13"), "run.torch: expected a torch requirement without spaces"),
    (with_change("run", "torch", "torchvision==0.20"), "run.torch: expected a torch requirement"),
    (with_change("run", "env_cache", "yes"), "run.env_cache: expected true or false"),
    (with_change("storage", "bucket", "xn--bucket"),
     "storage.bucket: 'xn--bucket' is not an S3 bucket name (S3 reserves"),
    (with_change("capacity", "max_price", "1_0"), "capacity.max_price: expected a plain decimal like 0.45"),
    (with_change("capacity", "max_price", "0001.5"), "capacity.max_price: expected a plain decimal like 0.45"),
    (with_change("network", "subnets", "Create"), 'network.subnets: expected "create", "parameter" or a list'),
    (with_change("run", "data", "s3://192.168.5.4/x"), "run.data: dataset '192.168.5.4' is not an S3 bucket name"),
    (with_change("run", "train_args", "--model lm --steps 9 --data s3://my..data/x"),
     "run.train_args: dataset 'my..data' is not an S3 bucket name"),
    (with_change("run", "train_args", "--model lm --steps 9 --data 's3://my-data/my set/'"),
     "run.train_args: dataset key prefix 'my set' has spaces"),
    (with_changes("run", data="s3://my-data/cifar", train_args="--model resnet --steps 9 --data s3://other-data/cifar"),
     "run.data: names s3://my-data/cifar but the built-in trainer reads --data s3://other-data/cifar"),
    (with_change("capacity", "instance_types", [f"c7i.{n}xlarge" for n in range(2, 43)]),
     "capacity.instance_types: lists 41 types; a mixed instances policy takes at most 40"),
    (with_change("capacity", "instance_types", ["g5.nano"]),
     "capacity.instance_types: 'g5.nano' does not exist: g5 comes in xlarge, 2xlarge, 4xlarge, 8xlarge, 12xlarge"),
    (with_change("capacity", "instance_types", ["g5.xlarge", "g5.3xlarge"]),
     "capacity.instance_types: 'g5.3xlarge' does not exist: g5 comes in xlarge, 2xlarge, 4xlarge, 8xlarge"),
    (with_change("capacity", "instance_types", ["c7i.nano"]),
     "capacity.instance_types: 'c7i.nano' does not exist: c7i comes in large, xlarge, 2xlarge"),
    ({**with_change("network", "vpc_id", "vpc-0abc1234"), "network": {"subnets": "create", "vpc_id": "vpc-0abc1234"}},
     "network.vpc_id: only used with network.subnets"),
    (with_change("run", "workdir", ".."), "run.workdir: '..' lies outside the job file's folder, and all of it "
     f"would be shipped: move your code to {JOBS_DIR / REPO.name}/ and set workdir = \"{REPO.name}\""),
    (with_change("run", "train_args", "--model resnet"),
     "run.train_args: the following arguments are required: --steps (in '--model resnet')"),
    (with_change("run", "train_args", "--model resnet --steps 10"),
     "run.train_args: one of the arguments --data --synthetic is required"),
    (with_change("run", "train_args", "--model lm --steps abc --synthetic"),
     "run.train_args: argument --steps: invalid positive_int value: 'abc'"),
    (with_change("run", "train_args", "--model lm --steps 9 --synthetic --fast"),
     "run.train_args: unrecognized arguments: --fast"),
    (with_change("run", "train_args", "--model lm --steps 9 --synthetic --width 30"),
     "run.train_args: --width 30 must be a multiple of 4 for the lm model"),
    (with_change("run", "train_args", "--model lm --steps 9 --synthetic --warmup-steps 10"),
     "run.train_args: --warmup-steps 10 must be between 0 and --steps 9"),
    (with_change("run", "train_args", "--model lm --step 9 --dat s3://sets/x"),
     "run.train_args: --step: spell the flag in full (--steps)"),
    (with_change("run", "train_args", "--model lm --steps 9 --synthetic --steps 90"),
     "run.train_args: --steps is given more than once"),
    (with_change("run", "train_args", "--model lm --steps 9 --synthetic --help"),
     "run.train_args: --help only prints the help: the job would end after no steps"),
    (with_change("run", "train_args", "--model lm --steps 9 --synthetic --checkpoint-dir /tmp/ck"),
     "run.train_args: leave out --checkpoint-dir: the agent restores into $CHECKPOINT_DIR"),
    (with_change("run", "data", "my-datasets/cifar10"), "run.data: expected s3://bucket/prefix"),
    (with_change("run", "data", "s3://data--ol-s3/cifar10"), "run.data: dataset 'data--ol-s3' is not an S3 bucket "
     "name (S3 reserves its prefix or suffix)"),
    (with_change("run", "data", "s3://my..data/cifar10"), "run.data: dataset 'my..data' is not an S3 bucket name"),
    (with_change("run", "trainer_package", "spot-trainer"), "run.trainer_package: 'spot-trainer' is not pinned to one "
     "version: an instance would run as root whatever the index serves under that name"),
    (with_change("run", "trainer_package", "spot-trainer[hf]>=0.2,<0.3"), "run.trainer_package: "
     "'spot-trainer[hf]>=0.2,<0.3' is not pinned to one version"),
    (with_change("run", "trainer_package", "spot-trainer >= 0.2"), "run.trainer_package: 'spot-trainer >= 0.2' holds "
     "spaces: write one word, e.g. spot-trainer==0.2.0"),
    (with_change("run", "trainer_package", "s3://my-artifacts/spot-trainer.tar.gz"),
     "run.trainer_package: 's3://my-artifacts/spot-trainer.tar.gz': an s3:// package is the wheel itself"),
    (with_change("run", "trainer_package", "dist/spot_trainer-0.2.0-py3-none-any.whl"),
     "run.trainer_package: 'dist/spot_trainer-0.2.0-py3-none-any.whl' is a path on this machine"),
    (with_change("run", "trainer_package", "spot_trainer-0.2.0-py3-none-any.whl"),
     "run.trainer_package: 'spot_trainer-0.2.0-py3-none-any.whl' is a path on this machine"),
    (with_change("run", "trainer_package", "spot-trainer=0.2"),
     "run.trainer_package: 'spot-trainer=0.2' is not a pip requirement like spot-trainer==0.2.0"),
    ({}, "run.train_args: the built-in trainer needs --model, --steps and --data or --synthetic"),
    (with_change("capacity", "nodes", 0), "capacity.nodes: expected 1 to 64, got 0"),
    (with_change("capacity", "nodes", 65), "capacity.nodes: expected 1 to 64, got 65"),
    (with_change("storage", "keep_checkpoints", 0), "storage.keep_checkpoints: expected 1 to 999, got 0"),
    (with_change("capacity", "nodes", "2"), "capacity.nodes: expected an integer"),
    (with_change("capacity", "nodes", True), "capacity.nodes: expected an integer"),
    (with_change("capacity", "ami", "ubuntu"), "capacity.ami: expected an SSM parameter path"),
    (with_change("capacity", "volume_size", 4), "capacity.volume_size: expected 8..16384"),
    (with_change("access", "ssh_cidr", "10.0.0.0/33"), "access.ssh_cidr: '10.0.0.0/33' is not a CIDR"),
    (with_change("access", "ssh_cidr", "0.0.0.0/0"), "access.ssh_cidr: refusing SSH from the whole internet"),
    ({**with_change("access", "ssh_cidr", "203.0.113.0/24")}, "access.key_pair: required"),
    (with_change("network", "subnets", ["sg-123"]), "network.subnets: expected subnet-"),
    (with_change("network", "subnets", ["subnet-1"]), "network.subnets: expected subnet-… ids (8 or 17 hex"),
    (with_change(None, "network", {"vpc_id": "vpc-xyz", "subnets": ["subnet-0a1b2c3d"]}),
     "network.vpc_id: expected a VPC id like vpc-0123456789abcdef0, got 'vpc-xyz'"),
    (with_change(None, "network", {"vpc_id": "vpc-0abc1234", "subnets": ["subnet-0a1b2c3d", "subnet-0a1b2c3d"]}),
     "network.subnets: lists a subnet twice"),
    ({**with_changes("access", ssh_cidr="2001:db8::/32", key_pair="k")}, "access.ssh_cidr: '2001:db8::/32' is IPv6"),
    (with_change("storage", "log_retention_days", 10), "storage.log_retention_days: expected one of"),
    (with_change("run", "stop_signal", "SIGKILL"), "run.stop_signal: expected one of"),
    (with_change("run", "stop_signal", "SIGUSR1"), "run.stop_signal: the built-in trainer saves on SIGTERM or SIGINT"),
    (with_change("run", "workdir", "no-such-dir"), "run.workdir: 'no-such-dir' is not a directory"),
    (with_change(None, "userdata_version", "v9"), "userdata_version: 'v9' not found"),
    (with_change(None, "description", "é" * 600), "description: 1200 bytes; with the stack's own prefix"),
    (with_change(None, "description", "d" * 1010), "description: 1010 bytes; with the stack's own prefix the "
     "template's description would be 1036"),
    (with_change(None, "userdata_version", "v1"), "userdata_version: v1 starts the runtime as `trainer`"),
    (with_change("run", "grace_seconds", 1), "run.grace_seconds: expected 10..7200"),
    (with_change("run", "save_warn_seconds", 10), "run.save_warn_seconds: expected 60..86400 seconds, got 10"),
    (with_change("storage", "bucket", "My_Bucket"), "storage.bucket: 'My_Bucket' is not an S3 bucket name"),
    (with_change("storage", "bucket", "my..bucket"), "storage.bucket: 'my..bucket' is not an S3 bucket name"),
    (with_change("storage", "bucket", "192.168.5.4"), "storage.bucket: '192.168.5.4' is not an S3 bucket name"),
    (with_changes("capacity", distributed=True, nodes=1),
     "capacity.distributed: a distributed job needs at least 2 nodes, capacity.nodes is 1"),
    (with_change("capacity", "distributed", "yes"), "capacity.distributed: expected true or false"),
    (with_changes("capacity", nodes=3, min_nodes=2), "capacity.min_nodes: only applies when capacity.distributed"),
    (distributed(min_nodes=4), "capacity.min_nodes: expected 1 to capacity.nodes (3), got 4"),
    (distributed(min_nodes=0), "capacity.min_nodes: expected 1 to capacity.nodes (3), got 0"),
    (distributed(placement="spread"), "capacity.placement: expected \"cluster\" or \"\", got 'spread'"),
    (with_changes("capacity", nodes=3, placement="cluster"), "capacity.placement: only applies when capacity.distri"),
    ({**distributed(placement="cluster"),
      "network": {"vpc_id": "vpc-0abc1234", "subnets": ["subnet-0a1b2c3d", "subnet-0b2c3d4e"]}},
     "capacity.placement: \"cluster\" keeps every node in one AZ: network.subnets must list exactly one subnet, got 2"),
    ({**distributed(), "userdata_version": "v1", "run": {**EXAMPLE["run"], "trainer_package": "spot-trainer==0.1.0"}},
     "capacity.distributed: user data v1 and spot-trainer 0.1 have no multi-node training"),
    ({**with_changes("run", setup="pip install x\nSPOT_TRAINER_VALUE\ntouch /tmp/pwned",
                     trainer_package="spot-trainer==0.1.0"), "userdata_version": "v1"},
     "run.setup: must be one line with user data v1 (its header carries values in here-documents)"),
    (with_change(None, "network", {"subnets": []}), 'network.subnets: an empty list: give subnet-… ids, "create" '
     'or "parameter"'),
    (with_change("notify", "email", "ml-team"), "notify.email: expected an e-mail address like ml-team@example.com"),
    (with_change("notify", "email", "a b@example.com"), "notify.email: expected an e-mail address"),
    (with_change("notify", "emails", "x@example.com"),
     "notify.emails: unknown key: did you mean email? (known: email, stall_minutes, restart_on_stall)"),
    (with_change("notify", "stall_minutes", -1), "notify.stall_minutes: expected 0 (no stall alarm) to 1440"),
    (with_change("notify", "stall_minutes", 1441), "notify.stall_minutes: expected 0 (no stall alarm) to 1440"),
    (with_change("notify", "stall_minutes", "30"), "notify.stall_minutes: expected an integer"),
    (with_change("schedule", "deadline", "tomorrow"), "schedule.deadline: deadline 'tomorrow' is neither a UTC "
     "timestamp like 2026-12-01T18:00:00Z nor a duration like 36h"),
    (with_change("schedule", "deadline", "2026-12-01T18:00:00"), "schedule.deadline: deadline '2026-12-01T18:00:00' "
     "is not a UTC timestamp like 2026-12-01T18:00:00Z (it must end in Z)"),
    (with_change("schedule", "deadline", "2026-13-01T18:00:00Z"), "schedule.deadline: deadline '2026-13-01T18:00:00Z'"
     " is not a UTC timestamp"),
    (with_change("schedule", "deadline", "2020-01-01T00:00:00Z"), "schedule.deadline: 2020-01-01T00:00:00Z has "
     "already passed"),
    (with_change("schedule", "deadline", " 36h"), "schedule.deadline: ' 36h' has leading or trailing spaces"),
    (with_change("schedule", "deadline", "1.5d"), "schedule.deadline: deadline '1.5d' is neither"),
    (with_change("schedule", "deadline", datetime(2030, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))),
     "schedule.deadline: 2030-01-01T12:00:00+02:00 is not in UTC: end it in Z"),
    (with_change("schedule", "max_spot_wait", "2 hours"), "schedule.max_spot_wait: duration '2 hours' is not whole "
     "numbers with units d, h, m, s"),
    (with_change("schedule", "max_spot_wait", "0m"), "schedule.max_spot_wait: duration '0m' must be longer than zero"),
    (with_change("schedule", "margin", ""), "schedule.margin: duration '' is not whole numbers"),
    (with_change("schedule", "margin", 30), "schedule.margin: expected a string, got 30"),
    (with_change("schedule", "total_steps", 0), "schedule.total_steps: expected a positive number of steps, got 0"),
    (with_change("schedule", "budget_usd", 0), "schedule.budget_usd: expected USD above 0 and below 1e+09, at most 6 "
     "decimal places (like 50 or 0.25), got 0.0"),
    (with_change("schedule", "budget_usd", -5.0), "schedule.budget_usd: expected USD above 0"),
    (with_change("schedule", "budget_usd", 0.1234567), "schedule.budget_usd: expected USD above 0 and below 1e+09, at "
     "most 6 decimal places"),
    (with_change("schedule", "budget_usd", float("inf")), "schedule.budget_usd: expected USD above 0"),
    (with_change("schedule", "budget_usd", "50"), "schedule.budget_usd: expected a number, got '50'"),
    ({**with_changes("run", trainer_package="spot-trainer==0.1.0"), "schedule": {"budget_usd": 5},
      "userdata_version": "v1"}, "schedule.budget_usd: user data v1's agent keeps no budget"),
    (with_change("schedule", "total_steps", 39), "schedule.total_steps: 39 differs from the built-in trainer's "
     "--steps 40: leave it out"),
    (with_change("run", "checkpoint_dir", "my outputs"), "run.checkpoint_dir: 'my outputs': use letters, digits"),
    (with_change("run", "checkpoint_dir", "../shared/ckpt"), "run.checkpoint_dir: '../shared/ckpt' climbs out with "
     "'..'"),
    (with_change("run", "checkpoint_dir", "./"), "run.checkpoint_dir: './' is the working directory itself"),
    (with_change("run", "checkpoint_dir", "//"), "run.checkpoint_dir: '//' is the root or a folder right under it"),
    (with_change("run", "checkpoint_dir", "/mnt//x"), "run.checkpoint_dir: '/mnt//x': write the path plainly"),
    (with_change("run", "checkpoint_dir", "/"), "run.checkpoint_dir: '/' is the root or a folder right under it"),
    (with_change("run", "checkpoint_dir", "/mnt"), "run.checkpoint_dir: '/mnt' is the root or a folder right under"),
    (with_change("run", "checkpoint_dir", "/etc/ckpt"), "run.checkpoint_dir: '/etc/ckpt' lies in the system's own"),
    (with_change("run", "checkpoint_dir", "/opt/spot-trainer/work"), "run.checkpoint_dir: '/opt/spot-trainer/work' "
     "lies in Spot Trainer's own folder: give the folder relative to the working directory"),
    (with_change("run", "checkpoint_dir", "out;rm"), "run.checkpoint_dir: 'out;rm': use letters"),
    (with_change("run", "checkpoint_dir", "o" * 201), "run.checkpoint_dir: 201 characters; at most 200"),
    ({**with_changes("run", checkpoint_dir="outputs", trainer_package="spot-trainer==0.1.0"),
      "userdata_version": "v1"}, "run.checkpoint_dir: user data v1 always uses the agent's own folder"),
    ({**with_changes("run", save_warn_seconds=600, trainer_package="spot-trainer==0.1.0"),
      "userdata_version": "v1"}, "run.save_warn_seconds: user data v1 does not carry it: use v2"),
    ({**with_changes("run", secrets=["HF_TOKEN=ssm:/team/hf-token"], trainer_package="spot-trainer==0.1.0"),
      "userdata_version": "v1"}, "run.secrets: user data v1 does not carry it: use v2"),
    (with_change("run", "checkpoint_files", ["weights/last.pt"]), "run.checkpoint_files: 'weights/last.pt': expected "
     "one name inside the checkpoint folder, not a path: name the folder that holds the files"),
    (with_change("run", "checkpoint_files", [".ckpt.pt"]), "run.checkpoint_files: '.ckpt.pt': a name starting with"),
    (with_change("run", "checkpoint_files", ["a,b"]), "run.checkpoint_files: 'a,b': a name with a comma"),
    (with_change("run", "checkpoint_files", [" model.keras"]),
     "run.checkpoint_files: ' model.keras': expected the name"),
    ({**with_changes("run", checkpoint_files=["model.keras"], trainer_package="spot-trainer==0.1.0"),
      "userdata_version": "v1"}, "run.checkpoint_files: user data v1 does not carry it: use v2"),
    (with_change("capacity", "regions", ["us-east-1", "useast2"]),
     "capacity.regions: 'useast2' is not a region name like us-east-1"),
    (with_change("capacity", "regions", ["us-east-1", "eu-west-1", "us-east-1"]),
     "capacity.regions: us-east-1 is listed twice"),
    (with_change("capacity", "regions", [f"us-east-{n}" for n in range(1, 12)]),
     "capacity.regions: 11 regions; a job takes at most 10"),
    (with_changes("capacity", regions=["us-east-1"], region_wait="2m"),
     "capacity.region_wait: 2m is shorter than a boot and a restore"),
    (with_changes("capacity", regions=["us-east-1"], region_wait="soon"),
     "capacity.region_wait: duration 'soon' is not whole numbers with units"),
    ({**with_changes("capacity", regions=["us-east-1", "us-west-2"]), "network": {"subnets": ["subnet-0a1b2c3d"],
                                                                             "vpc_id": "vpc-0a1b2c3d"}},
     "network.subnets: a subnet lives in one region, and this job lists 2"),
    ({**with_changes("capacity", regions=["us-east-1", "us-west-2"], ami="ami-0123456789abcdef0"),
      "network": {"subnets": "create"}}, "capacity.ami: an AMI id lives in one region"),
    ({**with_changes("capacity", regions=["us-east-1", "us-west-2"]), "network": {"subnets": "create"},
      "storage": {"bucket": "kept-checkpoints"}}, "storage.bucket: a bucket lives in one region"),
    ({**with_changes("capacity", regions=["us-east-1", "us-west-2"]), "network": {"subnets": "create"},
      "name": "xn--job"}, "name: 'xn--job' makes the bucket name of region us-east-1 unusable"),
    ({**with_changes("capacity", regions=["us-east-1", "us-west-2"], ami="/aws/service/x",
                     distributed=False), "network": {"subnets": "create"}, "userdata_version": "v1",
      "run": {**EXAMPLE["run"], "trainer_package": "spot-trainer==0.1.0"}},
     "capacity.regions: user data v1 trains in the deploy region alone: use v2"),
]


BAD_CASE_IDS = [m.split(":")[0] + f"-{i}" for i, (_, m) in enumerate(BAD_CASES)]


@pytest.mark.parametrize(("data", "message"), BAD_CASES, ids=BAD_CASE_IDS)
def test_bad_field_is_one_line_naming_it(data: dict, message: str) -> None:
    with pytest.raises(JobSpecError) as caught:
        parse_job(data, JOBS_DIR / "example.toml")
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(f"{JOBS_DIR / 'example.toml'}: ") and message in text, text


def test_notifications_and_a_schedule_are_optional_with_defaults() -> None:
    spec = parse_job(EXAMPLE, JOBS_DIR / "example.toml")
    assert (spec.notify.email, spec.notify.stall_minutes) == ("", 30)
    assert (spec.schedule.deadline, spec.schedule.total_steps, spec.schedule.max_spot_wait, spec.schedule.margin) == (
        "", 0, "", "30m")


@pytest.mark.parametrize("deadline", ["36h", "90m", "2d", "1d12h", "2099-12-01T18:00:00Z", "2099-12-01T18:00Z"])
def test_a_deadline_is_a_future_utc_time_or_a_duration_from_the_first_start(deadline: str) -> None:
    spec = parse_job(with_change("schedule", "deadline", deadline), JOBS_DIR / "example.toml")
    assert spec.schedule.deadline == deadline


@pytest.mark.parametrize(("written", "budget"), [("50", 50.0), ("0.25", 0.25), ("1_000", 1000.0)])
def test_a_budget_is_usd_whole_or_with_cents(written: str, budget: float) -> None:
    spec = parse_job({**EXAMPLE, **tomllib.loads(f"[schedule]\nbudget_usd = {written}\n")}, JOBS_DIR / "example.toml")
    assert spec.schedule.budget_usd == budget


def test_an_unquoted_toml_date_time_in_utc_is_a_deadline() -> None:
    data = tomllib.loads('[schedule]\ndeadline = 2099-12-01T18:00:00Z\n')
    spec = parse_job({**EXAMPLE, **data}, JOBS_DIR / "example.toml")
    assert spec.schedule.deadline == "2099-12-01T18:00:00Z"


def test_own_commands_state_their_total_steps_the_builtin_may_repeat_its_own() -> None:
    own = parse_job(with_changes("run", command="python train.py", train_args="") | {"schedule": {"total_steps": 900}},
                    JOBS_DIR / "example.toml")
    assert own.schedule.total_steps == 900
    builtin = parse_job(with_change("schedule", "total_steps", 40), JOBS_DIR / "example.toml")  # --steps 40
    assert builtin.schedule.total_steps == 40


def test_several_nodes_stand_by_unless_the_job_says_distributed() -> None:
    spec = parse_job(with_change("capacity", "nodes", 3), JOBS_DIR / "example.toml")
    assert spec.capacity.distributed is False and spec.capacity.placement == ""


@pytest.mark.parametrize(("values", "fewest"), [({}, 3), ({"min_nodes": 2}, 2), ({"min_nodes": 1}, 1),
                                                ({"min_nodes": 3}, 3)])
def test_a_distributed_job_keeps_training_down_to_min_nodes_every_node_by_default(values: dict, fewest: int) -> None:
    spec = parse_job(distributed(**values), JOBS_DIR / "example.toml")
    assert spec.capacity.distributed is True and spec.capacity.nodes == 3 and spec.capacity.min_nodes == fewest


@pytest.mark.parametrize("network", [{"subnets": "parameter"}, {"subnets": "create"},
                                     {"vpc_id": "vpc-0abc1234", "subnets": ["subnet-0a1b2c3d"]}])
def test_a_cluster_placement_group_takes_one_subnet_or_leaves_the_choice_to_the_stack(network: dict) -> None:
    spec = parse_job({**distributed(placement="cluster"), "network": network}, JOBS_DIR / "example.toml")
    assert spec.capacity.placement == "cluster"


def test_v1_still_deploys_with_the_runtime_it_was_written_for() -> None:
    data = with_change("run", "trainer_package", "spot-trainer==0.1.0")
    spec = parse_job({**data, "userdata_version": "v1"}, JOBS_DIR / "example.toml")
    assert spec.userdata_version == "v1" and spec.run.trainer_package == "spot-trainer==0.1.0"


@pytest.mark.parametrize(("name", "expected"), [
    ("g5g.xlarge", "arm64"), ("c7gn.large", "arm64"), ("t4g.medium", "arm64"), ("hpc7g.4xlarge", "arm64"),
    ("g5.xlarge", "x86_64"), ("g4ad.xlarge", "x86_64"), ("gr6.4xlarge", "x86_64"), ("p6-b200.48xlarge", "x86_64"),
    ("c6gn.metal", "arm64"), ("inf2.xlarge", "x86_64"),
])
def test_architecture_of_an_instance_type(name: str, expected: str) -> None:
    assert architecture(name) == expected


@pytest.mark.parametrize("name", ["g6f.large", "p5.4xlarge", "c5.9xlarge", "t3.nano", "m7g.medium", "g5g.metal",
                                  "c7i.metal-48xl", "trn2.3xlarge"])
def test_every_size_ec2_has_is_accepted(name: str) -> None:
    assert instance_type_problem(name) is None


def test_arm_types_with_an_arm_image_are_accepted() -> None:
    data = with_change("capacity", "instance_types", ["g5g.xlarge", "c7g.xlarge"])
    data["capacity"]["ami"] = "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest"
    assert parse_job(data, JOBS_DIR / "example.toml").capacity.instance_types == ("g5g.xlarge", "c7g.xlarge")


@pytest.mark.parametrize(("run", "expected"), [
    ({"train_args": "--model resnet --steps 9 --data s3://sets/cifar10/"}, ("sets", "cifar10")),
    ({"train_args": "--model resnet --steps 9 --data=s3://sets"}, ("sets", "")),
    ({"train_args": "--model resnet --steps 9 --data /mnt/cifar"}, None),
    ({"command": "python train.py", "data": "s3://sets/text/v2"}, ("sets", "text/v2")),
    ({"command": "python train.py"}, None),
])
def test_the_data_a_job_reads_comes_from_run_data_or_the_builtin_data_flag(run: dict, expected: object) -> None:
    assert data_location(RunSpec(**run)) == expected


@pytest.mark.parametrize("package", ["spot-trainer==0.2.0", "spot-trainer[hf]==0.2.0",
                                     "s3://my-artifacts/assets/0f3c.whl", "https://example.com/spot_trainer.whl",
                                     "git+https://github.com/me/spot-trainer@v0.2.0"])
def test_a_trainer_package_pip_can_fetch_on_an_instance_is_accepted(package: str) -> None:
    assert parse_job(with_change("run", "trainer_package", package), JOBS_DIR / "example.toml").run.trainer_package


def test_a_job_that_names_no_package_ships_this_checkouts_runtime() -> None:
    assert parse_job(with_change("run", "trainer_package", ""), JOBS_DIR / "example.toml").run.trainer_package == ""


def test_unknown_job_lists_the_available_ones() -> None:
    with pytest.raises(JobSpecError, match=r"no file .*nope.toml \(jobs available: .*example"):
        load_job("nope")


@pytest.mark.parametrize(("given", "meant"), [(str(JOBS_DIR / "cifar"), str(JOBS_DIR / "cifar.toml")),
                                              ("cifar.toml", "cifar")])
def test_a_job_given_almost_right_names_what_was_likely_meant(given: str, meant: str) -> None:
    with pytest.raises(JobSpecError, match=re.escape(f"did you mean -c job={meant}?")):
        load_job(given)


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    job = tmp_path / "latin.toml"
    job.write_bytes('description = "café"\n'.encode("latin-1"))
    with pytest.raises(JobSpecError) as caught:
        load_job(str(job))
    assert str(caught.value) == f"{job}: not UTF-8 text (byte 18 is 0xe9); save the file as UTF-8"


def test_a_byte_order_mark_from_an_editor_is_no_error(tmp_path: Path) -> None:
    job = tmp_path / "example.toml"
    job.write_bytes(b"\xef\xbb\xbf" + (JOBS_DIR / "example.toml").read_bytes())
    assert load_job(str(job)).name == "example"


def test_invalid_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    job = tmp_path / "broken.toml"
    job.write_text("[run\ncommand = 1\n")
    with pytest.raises(JobSpecError, match=r"broken.toml: not valid TOML"):
        load_job(str(job))


def test_cdk_app_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    job = tmp_path / "bad.toml"
    job.write_text('[run]\ntrain_args = "--model lm --steps 10 --synthetic"\n'
                   '[capacity]\ninstance_types = ["g5.huge"]\n')
    result = subprocess.run(
        [sys.executable, "app.py"], cwd=REPO, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "CDK_CONTEXT_JSON": f'{{"job": "{job}"}}', "CDK_OUTDIR": str(tmp_path / "out"),
             "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"spot-trainer: {job}: capacity.instance_types: 'g5.huge' is not an instance type name "
        "(expected family.size, e.g. g5.xlarge)")
    assert "Traceback" not in result.stderr


def test_user_data_over_16_kib_is_refused_at_synth_with_one_line(tmp_path: Path) -> None:
    job = tmp_path / "long.toml"
    setup = " && ".join(f"pip install package-number-{n}" for n in range(200))  # about 6 KB
    job.write_text(f'[run]\ncommand = "python train.py"\nsetup = "{setup}"\n')
    result = subprocess.run(
        [sys.executable, "app.py"], cwd=REPO, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "CDK_CONTEXT_JSON": f'{{"job": "{job}"}}', "CDK_OUTDIR": str(tmp_path / "out"),
             "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"spot-trainer: {job}: run.command, run.train_args and run.setup make the user data ")
    assert "over EC2's 16384" in last



@pytest.mark.parametrize("folder", ["outputs", "./runs/exp-1/", "/mnt/checkpoints", "/home/ubuntu/out"])
def test_a_folder_of_the_jobs_own_is_taken_for_checkpoint_dir(folder: str) -> None:
    spec = parse_job(with_changes("run", command="python train.py", train_args="", checkpoint_dir=folder),
                     JOBS_DIR / "example.toml")
    assert spec.run.checkpoint_dir == folder


def test_restarting_a_hung_command_is_asked_for_and_refused_where_the_agent_cannot_judge_a_hang() -> None:
    assert parse_job(with_change("notify", "restart_on_stall", True), JOBS_DIR / "example.toml").notify.restart_on_stall
    assert not parse_job(with_changes("run"), JOBS_DIR / "example.toml").notify.restart_on_stall
    several = {**distributed(), "notify": {"restart_on_stall": True}}
    with pytest.raises(JobSpecError, match="notify.restart_on_stall: .*several nodes keep the stall alarm alone"):
        parse_job(several, JOBS_DIR / "example.toml")
    with pytest.raises(JobSpecError, match="notify.restart_on_stall"):
        parse_job(with_change("notify", "restart_on_stall", "yes"), JOBS_DIR / "example.toml")
