"""What a console user types is checked by the template's own parameter constraints, with the same
rules as the job file: each case is judged by the synthesized AllowedPattern / MinValue / MaxValue."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from spot_trainer.capacity.policy import parse_deadline, parse_duration
from stacks.console.made_at_synth import instance_types_pattern
from stacks.job.instance_types import architecture, ec2_instance_types
from stacks.job.spec import JOBS_DIR, JobSpec, JobSpecError
from stacks.job_file import load_job
from stacks.training_stack import SpotTrainingStack
from tests.unit.stack_support import Synthesized, synth


@pytest.fixture(scope="module")
def parameters(synthesized: dict[str, Synthesized]) -> dict[str, dict[str, Any]]:
    return synthesized["example"].raw["Parameters"]  # type: ignore[no-any-return]


def accepted(parameter: dict[str, Any], value: str) -> bool:
    """CloudFormation's checks of a typed value (AllowedPattern must match the whole value)."""
    if "AllowedPattern" in parameter and not re.fullmatch(parameter["AllowedPattern"], value):
        return False
    if "AllowedValues" in parameter and value not in parameter["AllowedValues"]:
        return False
    if "MaxLength" in parameter and len(value) > int(parameter["MaxLength"]):
        return False
    if parameter["Type"] == "Number":
        try:
            number = float(value)
        except ValueError:
            return False
        return float(parameter.get("MinValue", "-inf")) <= number <= float(parameter.get("MaxValue", "inf"))
    return True


CASES = [
    ("TrainingCommand", "builtin", True),
    ("TrainingCommand", "python train.py --lr 'a b'", True),
    ("TrainingCommand", "", False),
    ("TrainingCommand", "   ", False),
    ("TrainingCommand", "python a.py\npython b.py", False),
    ("TrainingCommand", "python a.py\nSPOT_TRAINER_VALUE\ntouch /x", False),
    ("TrainingCommand", "builtin;", False),
    ("TrainingCommand", "builtin # the default", False),
    ("TrainingCommand", "builtin_train.sh", True),
    ("TrainingCommand", "python builtin.py", True),
    ("TrainArguments", "", True),
    ("DataBucket", "", True),
    ("DataBucket", "my-datasets", True),
    ("DataBucket", "My_Datasets", False),
    ("DataBucket", "s3://my-datasets", False),
    ("DataPrefix", "", True),
    ("DataPrefix", "cifar10/", True),
    ("DataPrefix", "datasets/cifar10/", True),
    ("DataPrefix", "cifar10", False),  # would also grant cifar100/
    ("DataPrefix", "/cifar10/", False),
    ("DataPrefix", "cifar 10/", False),
    ("TrainArguments", "--steps 10\r", False),
    ("TrainArguments", "--lr 0.1 " * 100, True),
    ("TrainArguments", "--lr 0.1 " * 1000, False),  # would push the user data past EC2's 16 KiB
    ("SetupCommand", "pip install -r requirements.txt", True),
    ("SetupCommand", "pip install a && " * 500, False),
    ("WorkingDirectory", "/opt/spot-trainer/work", True),
    ("WorkingDirectory", "work", False),
    ("WorkingDirectory", "/opt/my work", False),
    ("TrainerPackage", "spot-trainer==0.2.0", True),
    ("TrainerPackage", "", True),  # the runtime shipped with the stack
    ("TrainerPackage", "spot-trainer", False),
    ("TrainerPackage", "spot-trainer>=0.2", False),
    ("TrainerPackage", "s3://my-artifacts/assets/0f3c.whl", True),
    ("TrainerPackage", "https://example.com/spot_trainer.whl", True),
    ("TrainerPackage", "spot-trainer >= 0.2", False),
    ("TrainerPackage", "s3://my-artifacts/spot-trainer.tar.gz", False),
    ("TrainerPackage", "dist/spot_trainer-0.2.0-py3-none-any.whl", False),
    ("TrainerPackage", "/home/me/spot_trainer.whl", False),
    ("SshCidr", "", True),
    ("SshCidr", "203.0.113.0/24", True),
    ("SshCidr", "0.0.0.0/0", False),
    ("SshCidr", "10.0.0.0/0", False),
    ("SshCidr", "999.999.999.999/32", False),
    ("SshCidr", "256.1.1.1/32", False),
    ("SshCidr", "10.0.0.0/33", False),
    ("Nodes", "0", True),
    ("Nodes", "2", True),
    ("Nodes", "64", True),
    ("Nodes", "65", False),
    ("Nodes", "1.5", False),
    ("Nodes", "-1", False),
    ("Distributed", "true", True),
    ("Distributed", "false", True),
    ("Distributed", "True", False),
    ("Distributed", "yes", False),
    ("Distributed", "", False),
    ("MinNodes", "1", True),
    ("MinNodes", "2", True),
    ("MinNodes", "64", True),
    ("MinNodes", "0", False),  # a round of no nodes trains nothing
    ("MinNodes", "65", False),
    ("MinNodes", "02", False),
    ("MinNodes", "1.5", False),
    ("MinNodes", "", False),
    ("CheckpointVersionRetentionDays", "30", True),
    ("CheckpointVersionRetentionDays", "1", True),
    ("CheckpointVersionRetentionDays", "1.5", False),
    ("CheckpointVersionRetentionDays", "0", False),
    ("CheckpointVersionRetentionDays", "-3", False),
    ("KeepCheckpoints", "3", True),
    ("KeepCheckpoints", "0", False),
    ("KeepCheckpoints", "1.5", False),
    ("InstanceTypes", "c7i.xlarge,c6i.xlarge,m6i.xlarge", True),
    ("InstanceTypes", "c7i.xlarge", False),
    ("InstanceTypes", "c7i.xlarge,c6i.xlarge,m6i.xlarge,m7i.xlarge", False),
    ("InstanceTypes", "c7i.xlarge, c6i.xlarge,m6i.xlarge", False),
    ("InstanceTypes", "c7i.xlarge,c7i.xlarge,m6i.xlarge", False),  # a type twice: an override the group refuses
    ("InstanceTypes", "c7i.xlarge,c6i.xlarge,c7i.xlarge", False),
    ("InstanceTypes", "c7i.large,c7i.xlarge,c7i.2xlarge", True),  # no type is a prefix of another's match
    ("InstanceTypes", "c7g.xlarge,c6i.xlarge,m6i.xlarge", False),  # Graviton: the x86_64 image cannot run on it
    ("InstanceTypes", "c6i.xlarge,m6i.xlarge,t4g.large", False),
    ("InstanceTypes", "g4dn.xlarge,gr6.4xlarge,p6-b200.48xlarge", True),
    ("VolumeSize", "100", True),
    ("VolumeSize", "8", True),
    ("VolumeSize", "16384", True),
    ("VolumeSize", "8.5", False),
    ("VolumeSize", "7", False),
    ("VolumeSize", "16385", False),
    ("ExistingBucket", "", True),
    ("ExistingBucket", "kept-checkpoints.v2", True),
    ("ExistingBucket", "my..bucket", False),
    ("ExistingBucket", "192.168.5.4", False),
    ("ExistingBucket", "My_Bucket", False),
    ("ExistingBucket", "xn--bucket", False),
    ("ExistingBucket", "sthree-checkpoints", False),
    ("ExistingBucket", "checkpoints-s3alias", False),
    ("ExistingBucket", "checkpoints--ol-s3", False),
    ("ExistingBucket", "xn-bucket", True),
    ("DataBucket", "amzn-s3-demo-data", False),
    ("SpotMaxPrice", "", True),
    ("SpotMaxPrice", "0.45", True),
    ("SpotMaxPrice", ".5", True),
    ("SpotMaxPrice", "12", True),
    ("SpotMaxPrice", "999.99", True),
    ("SpotMaxPrice", "0", False),  # no instance launches at a price of zero
    ("SpotMaxPrice", "0.00", False),
    ("SpotMaxPrice", "1000", False),
    ("SpotMaxPrice", "1e20", False),
    ("SpotMaxPrice", "0.45 ", False),
    ("SpotMaxPrice", "-1", False),
    ("NotifyEmail", "", True),
    ("NotifyEmail", "ml-team@example.com", True),
    ("NotifyEmail", "first.last+spot@mail.example.co.uk", True),
    ("NotifyEmail", "ml-team", False),
    ("NotifyEmail", "a b@example.com", False),
    ("NotifyEmail", "x@example", False),
    ("StallAlarmMinutes", "0", True),
    ("StallAlarmMinutes", "30", True),
    ("StallAlarmMinutes", "1440", True),
    ("StallAlarmMinutes", "1441", False),
    ("StallAlarmMinutes", "030", False),
    ("StallAlarmMinutes", "", False),
    ("StallAlarmMinutes", "-5", False),
    ("Deadline", "", True),
    ("Deadline", "2026-12-01T18:00:00Z", True),
    ("Deadline", "2026-12-01T18:00Z", True),
    ("Deadline", "2026-12-01T18:00:00.5Z", True),
    ("Deadline", "36h", True),
    ("Deadline", "1d12h", True),
    ("Deadline", "2026-12-01T18:00:00", False),
    ("Deadline", "2026-12-01T18:00:00+02:00", False),
    ("Deadline", "0h", False),
    ("Deadline", "36", False),
    ("Deadline", "1.5d", False),
    ("Deadline", "tomorrow", False),
    ("TotalSteps", "", True),
    ("TotalSteps", "20000", True),
    ("TotalSteps", "0", False),
    ("TotalSteps", "-3", False),
    ("TotalSteps", "1e6", False),
    ("MaxSpotWait", "", True),
    ("MaxSpotWait", "2h", True),
    ("MaxSpotWait", "90m", True),
    ("MaxSpotWait", "0m", False),
    ("MaxSpotWait", "2 h", False),
    ("LogRetentionDays", "30", True),
    ("LogRetentionDays", "10", False),  # CloudWatch Logs takes only its own list of periods
    ("DeadlineMargin", "30m", True),
    ("DeadlineMargin", "1h30m", True),
    ("DeadlineMargin", "", False),
    ("DeadlineMargin", "0s", False),
    ("BudgetUSD", "", True),
    ("BudgetUSD", "50", True),
    ("BudgetUSD", "0.25", True),
    ("BudgetUSD", "0.000001", True),
    ("BudgetUSD", "0", False),  # a cap of nothing would stop every start: empty is "none"
    ("BudgetUSD", "0.00", False),
    ("BudgetUSD", "0.0000001", False),
    ("BudgetUSD", "-5", False),
    ("BudgetUSD", "1e3", False),
    ("BudgetUSD", "$50", False),
]


@pytest.mark.parametrize(("name", "value", "expected"), CASES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)])
def test_console_values_are_judged_like_the_job_file(
    parameters: dict[str, dict[str, Any]], name: str, value: str, expected: bool
) -> None:
    assert accepted(parameters[name], value) is expected


@pytest.mark.parametrize("name", [n for n, _, _ in CASES])
def test_a_refused_value_says_what_is_expected(parameters: dict[str, dict[str, Any]], name: str) -> None:
    # A list of AllowedValues is a pick list in the console, and CloudFormation's refusal names the list.
    assert parameters[name].get("ConstraintDescription") or parameters[name].get("AllowedValues"), (
        f"{name}: the console would only say 'malformed'")


def test_the_shipped_defaults_pass_their_own_constraints(parameters: dict[str, dict[str, Any]]) -> None:
    for name, parameter in parameters.items():
        if "Default" in parameter and parameter["Type"] in ("String", "Number"):
            assert accepted(parameter, str(parameter["Default"])), name


def test_the_cases_cover_every_constrained_text_parameter(parameters: dict[str, dict[str, Any]]) -> None:
    named = {n for n, _, _ in CASES}
    for name in ("TrainingCommand", "TrainArguments", "WorkingDirectory", "TrainerPackage", "SshCidr", "Nodes",
                 "MinNodes", "KeepCheckpoints", "InstanceTypes", "ExistingBucket", "VolumeSize", "NotifyEmail",
                 "StallAlarmMinutes", "Deadline", "TotalSteps", "MaxSpotWait", "DeadlineMargin", "SpotMaxPrice",
                 "DataBucket", "SetupCommand", "BudgetUSD"):
        assert name in named and ("AllowedPattern" in parameters[name] or "MaxLength" in parameters[name]), name
    assert "Distributed" in named and parameters["Distributed"]["AllowedValues"], "Distributed"




@pytest.mark.parametrize("value", ["36h", "90m", "2d", "1d12h", "45s", "0h30m", "2026-12-01T18:00:00Z",
                                   "2026-12-01T18:00Z", "2026-12-01T18:00:00.25Z"])
def test_a_deadline_the_console_takes_is_one_the_agent_reads(parameters: dict[str, dict[str, Any]],
                                                             value: str) -> None:
    assert accepted(parameters["Deadline"], value)
    assert parse_deadline(value, first_start=0.0) > 0


@pytest.mark.parametrize("value", ["36h", "90m", "1d12h", "45s", "0h30m"])
def test_a_duration_the_console_takes_is_one_the_agent_reads(parameters: dict[str, dict[str, Any]],
                                                             value: str) -> None:
    assert accepted(parameters["MaxSpotWait"], value) and accepted(parameters["DeadlineMargin"], value)
    assert parse_duration(value) > 0


def stack_error(job: JobSpec, tmp_path: Path) -> str:
    app = cdk.App(outdir=str(tmp_path), analytics_reporting=False)
    with pytest.raises(JobSpecError) as caught:
        SpotTrainingStack(app, job.stack_name, job=job)
    return str(caught.value)


def test_a_job_value_its_parameter_would_refuse_as_default_is_one_line_naming_the_field(tmp_path: Path) -> None:
    job = tmp_path / "own.toml"
    job.write_text('[run]\ncommand = "python train.py"\n[schedule]\ntotal_steps = 1000000000000000\n')
    with pytest.raises(JobSpecError) as caught:
        synth(str(job), tmp_path / "out")
    assert str(caught.value) == (f"{job}: schedule.total_steps: '1000000000000000' would be the default of the "
                                 "TotalSteps parameter, which takes empty, or a whole number above 0")


@pytest.mark.parametrize(("change", "message"), [
    (lambda job: replace(job, storage=replace(job.storage, noncurrent_days=0)),
     "storage.noncurrent_days: '0' would be the default of the CheckpointVersionRetentionDays parameter"),
    (lambda job: replace(job, capacity=replace(job.capacity, nodes=65)),
     "capacity.nodes: '65' would be the default of the Nodes parameter, which takes a whole number from 0 to 64"),
    (lambda job: replace(job, storage=replace(job.storage, log_retention_days=2)),
     "storage.log_retention_days: '2' would be the default of the LogRetentionDays parameter, which takes one of 1,"),
])
def test_every_default_is_held_to_its_parameters_own_constraints(change: Any, message: str, tmp_path: Path) -> None:
    # A safety net behind the job-file checks: whatever slips past them still stops at synth, in one line.
    text = stack_error(change(load_job("example")), tmp_path)
    assert "\n" not in text and text.startswith(f"{JOBS_DIR / 'example.toml'}: {message}"), text


def test_no_v1_console_value_can_end_a_here_document_and_run_at_boot(tmp_path: Path) -> None:
    """v1's header carries deploy-time values in here-documents ending at a line SPOT_TRAINER_VALUE: every
    parameter that lands in one must refuse a value holding that line, or it would run as root at boot."""
    job = tmp_path / "legacy.toml"
    job.write_text('userdata_version = "v1"\n[run]\ncommand = "python train.py"\n'
                   'trainer_package = "spot-trainer==0.1.0"\n')
    raw = synth(str(job), tmp_path / "out").raw
    (template,) = [r for r in raw["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    _, parts = template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"]
    in_heredocs = [part["Ref"] for before, part in zip(parts, parts[1:], strict=False)
                   if isinstance(part, dict) and part.get("Ref") in raw["Parameters"]
                   and str(before).endswith("<<'SPOT_TRAINER_VALUE'\n")]
    assert {"TrainingCommand", "TrainArguments", "SetupCommand", "TrainerPackage"} <= set(in_heredocs)
    breakout = "pip install x\nSPOT_TRAINER_VALUE\n)\ntouch /tmp/pwned"
    assert [name for name in in_heredocs if accepted(raw["Parameters"][name], breakout)] == []


@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_the_console_tells_the_architecture_of_every_ec2_type_as_the_job_file_does(arch: str) -> None:
    """The InstanceTypes pattern keeps a list of the job's architecture (its image's): for each type EC2 has,
    a list of three of it is taken exactly when the job file's check calls it that architecture."""
    pattern = instance_types_pattern(3, arch)
    others = "c7i.large,c7i.xlarge" if arch == "x86_64" else "c7g.large,c7g.xlarge"
    wrong = [name for name in ec2_instance_types() if name not in others
             and bool(re.fullmatch(pattern, f"{name},{others}")) != (architecture(name) == arch)]
    assert wrong == []


def test_an_arm_job_takes_graviton_types_only(tmp_path: Path) -> None:
    job = tmp_path / "graviton.toml"
    job.write_text('[run]\ntrain_args = "--model lm --synthetic --steps 10"\n[capacity]\n'
                   'instance_types = ["c7g.xlarge", "m7g.xlarge"]\nami = "/aws/service/graviton-ami"\n')
    parameter = synth(str(job), tmp_path / "out").raw["Parameters"]["InstanceTypes"]
    assert accepted(parameter, "c8g.xlarge,r7gd.large") and accepted(parameter, "g5g.xlarge,t4g.medium")
    assert not accepted(parameter, "c7g.xlarge,c7i.xlarge") and not accepted(parameter, "c7g.xlarge,c7g.xlarge")
    assert "arm64 types" in parameter["ConstraintDescription"]
