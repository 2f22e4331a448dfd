"""The header of exported SPOT_* variables every user data version receives: the stack ↔ bootstrap contract.

What the stack made (its bucket, group, log group, topic, the job's code) is given by the stack; every
setting of the job comes from the settings table: the value of its console parameter where the template
has one, else the job file's.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Aws, CfnParameter

from spot_trainer.settings import SETTINGS
from stacks.instance.userdata_versions import userdata_version
from stacks.job.spec import JobSpec, setting_text


def job_settings(job: JobSpec, parameters: Mapping[str, CfnParameter]) -> dict[str, str]:
    """Each setting the job decides that reaches the instance, in the table's order; `parameters`: the
    template's, by their names in the settings table. One that is
    `header_when_set` is written only when the job sets it: every byte of a built-in job's template
    counts against the CLI's 50 KiB, and the agent's default is the table's."""
    values: dict[str, str] = {}
    for setting in SETTINGS:
        parameter = next((parameters[p.name] for p in setting.console if p.name in parameters), None)
        if not setting.env or not (setting.field or parameter):
            continue
        if parameter is not None and len(setting.console) == 1:
            values[setting.env] = parameter.value_as_string
        elif setting.field and not (setting.header_when_set and job.value_of(setting.field) == setting.default):
            values[setting.env] = setting_text(job.value_of(setting.field))
    return values


def user_data_header(job: JobSpec, parameters: Mapping[str, CfnParameter], *,
                     made_by_stack: dict[str, str]) -> dict[str, str]:
    """`made_by_stack`: the names of what the stack made, and the package user data installs."""
    header = {**job_settings(job, parameters), "SPOT_REGION": Aws.REGION, **made_by_stack}
    names = userdata_version(job.userdata_version).frozen_header
    if names is not None:
        return {name: header[name] for name in names}
    return {setting.env: header[setting.env] for setting in SETTINGS if setting.env in header}
