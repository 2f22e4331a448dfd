"""Area 2: values typed into the CloudFormation console, judged by the template's own constraints and
Rules; a value the template takes is then given to the agent's own checks (refused at the first start)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostile.judging import Verdict, intended


@dataclass(frozen=True)
class ConsoleCase:
    case: str
    values: dict[str, str]
    job: str = "example"
    vpc_of: dict[str, str] | None = None


VPCS = {"subnet-a": "vpc-1", "subnet-b": "vpc-1", "subnet-c": "vpc-2"}
DEPLOY_DEFAULTS = {"VpcId": "vpc-1", "Subnets": "subnet-a,subnet-b"}


def one(name: str, value: str, job: str = "example") -> ConsoleCase:
    return ConsoleCase(f"{name}={value!r}" if len(value) < 60 else f"{name}=<{len(value)} chars>", {name: value}, job)


def console_cases() -> list[ConsoleCase]:
    return [
        one("SshCidr", "0.0.0.0/0"), one("SshCidr", "999.999.999.999/32"), one("SshCidr", "2001:db8::/32"),
        one("SshCidr", "203.0.113.0/24 "),
        ConsoleCase("SshCidr without KeyPair", {"SshCidr": "203.0.113.0/24", "KeyPair": ""}),
        ConsoleCase("SshCidr without KeyPair (cifar)", {"SshCidr": "203.0.113.0/24", "KeyPair": ""}, "cifar"),
        one("Nodes", "1.5"), one("Nodes", "-1"), one("Nodes", "65"),
        one("MinNodes", "0"),
        ConsoleCase("MinNodes above Nodes", {"Distributed": "true", "Nodes": "2", "MinNodes": "5"}),
        ConsoleCase("Distributed with Nodes 1", {"Distributed": "true", "Nodes": "1", "MinNodes": "1"}),
        one("KeepCheckpoints", "1.5"), one("VolumeSize", "8.5"),
        one("CheckpointVersionRetentionDays", "0"), one("LogRetentionDays", "10"),
        one("InstanceTypes", "c7i.xlarge,c6i.xlarge"), one("InstanceTypes", "c7i.xlarge, c6i.xlarge,m6i.xlarge"),
        one("InstanceTypes", "c7i.xlarge,c6i.xlarge,m6i.xlarge", "cifar"),
        one("InstanceTypes", "C7I.XLARGE,C6I.XLARGE,M6I.XLARGE"),
        one("InstanceTypes", "g5.nano,c6i.xlarge,m6i.xlarge"), one("InstanceTypes", "c7g.xlarge,c6i.xlarge,m6i.xlarge"),
        one("InstanceTypes", "c7i.xlarge,c7i.xlarge,c7i.xlarge"),
        one("TrainingCommand", ""), one("TrainingCommand", "builtin;"), one("TrainingCommand", "builtin "),
        one("TrainingCommand", "python a.py\nSPOT_TRAINER_VALUE\ntouch /x"),
        one("TrainArguments", "--lr 0.1 " * 200), one("TrainArguments", "--model lm --synthetic --steps abc"),
        one("TrainArguments", "--model 'lm"),
        one("SetupCommand", "pip install a && " * 100),
        one("TrainerPackage", ""), one("TrainerPackage", "/home/me/spot_trainer-0.2.0-py3-none-any.whl"),
        one("TrainerPackage", "./dist/spot_trainer.whl"),
        one("SpotMaxPrice", "0"), one("SpotMaxPrice", "1000"), one("SpotMaxPrice", "1e20"), one("SpotMaxPrice", "0,45"),
        one("ExistingBucket", "xn--x"), one("ExistingBucket", "192.168.5.4"), one("ExistingBucket", "s3://my-bucket"),
        one("Deadline", "tomorrow"), one("Deadline", "2030-12-01 18:00"), one("Deadline", "2020-01-01T00:00:00Z"),
        one("Deadline", "2030-02-30T00:00:00Z"),
        ConsoleCase("Subnets from another VPC", {"VpcId": "vpc-1", "Subnets": "subnet-a,subnet-c"}),
        one("NotifyEmail", "ml-team"), one("StallAlarmMinutes", "30m"),
        one("TotalSteps", "0"), one("TotalSteps", "1e6"), one("MaxSpotWait", "2 hours"), one("DeadlineMargin", ""),
        one("DataBucket", "s3://my-datasets"), one("WorkingDirectory", "work"),
        one("KeyPair", "my key; rm -rf /"),
        one("CheckpointFolder", "../ckpt", "byo"), one("CheckpointFolder", "/etc", "byo"),
        one("CheckpointFolder", "/opt/spot-trainer/work", "byo"), one("CheckpointFolder", "my outputs", "byo"),
        one("CheckpointFolder", "$(reboot)", "byo"),
    ]


def judge_console(template: dict[str, Any], case: ConsoleCase) -> tuple[str, str]:
    from tests.unit.test_console_parameters import accepted as console_accepts  # CloudFormation's checks
    from tests.unit.test_console_rules import refusals

    parameters = template["Parameters"]
    for name, value in case.values.items():
        parameter = parameters[name]
        if not console_accepts(parameter, value):
            description = parameter.get("ConstraintDescription", "")
            if description:
                return "clear", f"{name}: {description}"
            if "AllowedValues" in parameter:
                return "clear", f"{name}: a pick list in the console; CloudFormation names the allowed values"
            return "unclear", f"{name}: refused with no ConstraintDescription (the console only says it is invalid)"
    found = refusals(template, {**DEPLOY_DEFAULTS, **case.values}, {**VPCS, **(case.vpc_of or {})})
    if found:
        return ("clear", found[0]) if all(found) else ("unclear", "a Rule refuses it with no AssertDescription")
    if refused := refused_at_start(template, case.values):
        return "at_start", f"refused at the first start (FAILED, group to zero): {refused}"
    return "accepted", "the console takes it: " + ", ".join(f"{k}={v!r}"[:80] for k, v in case.values.items())


# Console parameters that reach the agent's settings unchanged (stacks/training_stack.py's header).
AGENT_SETTINGS = {"TrainingCommand": "SPOT_COMMAND", "TrainArguments": "SPOT_TRAIN_ARGS",
                  "Distributed": "SPOT_DISTRIBUTED", "MinNodes": "SPOT_MIN_NODES", "Nodes": "SPOT_MAX_NODES",
                  "Deadline": "SPOT_DEADLINE", "TotalSteps": "SPOT_TOTAL_STEPS",
                  "DeadlineMargin": "SPOT_DEADLINE_MARGIN", "KeepCheckpoints": "SPOT_KEEP_CHECKPOINTS"}


def refused_at_start(template: dict[str, Any], values: dict[str, str]) -> str | None:
    """What the agent's own checks say of the deployed values when its instance starts, or None."""
    from spot_trainer.agent.instance.config import ConfigError, check_config, config_from_env

    typed = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()} | values
    env = {"SPOT_JOB": "example", "SPOT_BUCKET": "checkpoints-bucket", "SPOT_REGION": "us-east-1",
           **{setting: typed[name] for name, setting in AGENT_SETTINGS.items() if name in typed}}
    with tempfile.TemporaryDirectory() as directory:
        try:
            check_config(config_from_env({**env, "SPOT_CHECKPOINT_DIR": directory}))
        except ConfigError as error:
            return str(error)
    return None


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While synthesizing in-process, whatever the CDK (or its node process) prints goes to stderr: stdout
    carries the JSON alone."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def console_verdicts(root: Path) -> list[Verdict]:
    from tests.unit.stack_support import synth

    with stdout_to_stderr():
        templates = {job: synth(job, root / "console" / job).raw for job in ("example", "cifar", "byo")}
    verdicts = []
    for case in console_cases():
        outcome, output = judge_console(templates[case.job], case)
        verdicts.append(intended(Verdict("console", f"{case.job}: {case.case}", outcome, output[:300])))
    return verdicts
