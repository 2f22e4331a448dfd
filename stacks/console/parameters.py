"""CloudFormation parameters for console users, made by walking the settings table: AWS-specific types,
defaults from the job file, grouped and labelled in the order a person fills them in (what to run →
capacity → network → schedule and alerts → storage → access). What a parameter takes from the job is
`made_at_synth`'s to say."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from aws_cdk import CfnParameter, Stack

from spot_trainer.settings import (
    ConsoleGroup,
    ConsoleParameter,
    console_parameter,
    console_parameters,
    field_of_parameter,
)
from stacks.console.made_at_synth import job_default, offered, shaped
from stacks.job.spec import JobSpec, JobSpecError

# The template lists its parameters in the order they are made, which is the console's but for the network:
# made after the schedule and alerts, where it was first added, so that a job's template keeps its bytes.
_MADE_IN_GROUP_ORDER = (ConsoleGroup.RUN, ConsoleGroup.CAPACITY, ConsoleGroup.SCHEDULE, ConsoleGroup.NETWORK,
                        ConsoleGroup.STORAGE, ConsoleGroup.ACCESS)


class JobParameters(Mapping[str, CfnParameter]):
    """The template's parameters by their names in the settings table, in the console's order:
    `params["Nodes"]` for one every job has, `params.offered("VpcId")` for one only some jobs have."""

    def __init__(self, made: Mapping[str, CfnParameter]) -> None:
        self._made = dict(made)

    def __getitem__(self, name: str) -> CfnParameter:
        try:
            return self._made[name]
        except KeyError:
            raise KeyError(f"{name}: not a parameter of this job's template") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._made)

    def __len__(self) -> int:
        return len(self._made)

    def value(self, name: str) -> str:
        """The parameter's value at deploy time, as a string token."""
        return str(self[name].value_as_string)

    def offered(self, name: str) -> CfnParameter | None:
        """The parameter, or None where this job's template does not have it (see made_at_synth's
        OFFERED_ONLY_WHEN)."""
        console_parameter(name)  # a name the settings table lacks is a mistake, not an absent parameter
        return self._made.get(name)


def add_job_parameters(stack: Stack, job: JobSpec) -> JobParameters:
    """Each parameter of the settings table the job is offered, shaped and defaulted for it, with the
    console's groups and labels."""
    shown = [shaped(parameter, job) for parameter in console_parameters() if offered(parameter, job)]
    made = {p.name: _make(stack, p, job) for p in sorted(shown, key=lambda p: _MADE_IN_GROUP_ORDER.index(p.group))}
    stack.template_options.metadata = {"AWS::CloudFormation::Interface": _interface(shown)}
    params = JobParameters({p.name: made[p.name] for p in shown})
    _check_defaults(params, job)
    return params


def _make(stack: Stack, parameter: ConsoleParameter, job: JobSpec) -> CfnParameter:
    constraints: dict[str, Any] = {"allowed_pattern": parameter.pattern, "allowed_values": list(parameter.values),
                                   "constraint_description": parameter.rule}
    return CfnParameter(stack, parameter.name, type=parameter.type, default=job_default(parameter, job),
                        description=parameter.description, **{k: v for k, v in constraints.items() if v})


def _interface(shown: list[ConsoleParameter]) -> dict[str, Any]:
    """The console's groups, in ConsoleGroup's order (one the job has no parameter of is left out), and labels."""
    groups = [(group, [p.name for p in shown if p.group == group]) for group in ConsoleGroup]
    return {
        "ParameterGroups": [{"Label": {"default": group.value}, "Parameters": names} for group, names in groups
                            if names],
        "ParameterLabels": {p.name: {"default": p.label} for p in shown},
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


def _check_defaults(params: JobParameters, job: JobSpec) -> None:
    """A job-file value the checks let through but its parameter refuses would make a template whose own
    defaults the console rejects: stop at synth, naming the field."""
    data_field = "run.data" if job.run.data else "run.train_args"  # the dataset's is either
    for name, param in params.items():
        if rule := default_problem(param):
            field = data_field if field_of_parameter(name) == "run.data" else field_of_parameter(name) or name
            raise JobSpecError(f"{job.source}: {field}: {str(param.default)!r} would be the "
                               f"default of the {name} parameter, which takes {rule}")
