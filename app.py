#!/usr/bin/env python3
"""CDK entry point: `-c job=NAME` (jobs/NAME.toml, or a path) → one SpotTrainingStack."""

from __future__ import annotations

import sys

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from stacks.job_file import parse_job, read_job_file
from stacks.job_spec import JobSpecError
from stacks.notice_fit import grace_warning
from stacks.template_size import too_large_warning
from stacks.training_stack import SpotTrainingStack


def build_app(app: cdk.App) -> SpotTrainingStack:
    job_name = app.node.try_get_context("job")
    if not job_name:
        raise JobSpecError('no job given: pass -c job=NAME (cdk.json sets "job" by default)')
    data, source = read_job_file(str(job_name))
    # `-c trainer_package=s3://…/x.whl`: the runtime published beforehand (python -m stacks.console_template)
    if (package := app.node.try_get_context("trainer_package")) is not None:
        data.setdefault("run", {})["trainer_package"] = str(package)
    job = parse_job(data, source)
    if warning := grace_warning(job):
        print(f"spot-trainer: WARNING: {warning}", file=sys.stderr)
    stack = SpotTrainingStack(app, job.stack_name, job=job)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stack


def main() -> None:
    # Version reporting and path metadata off: the template stays standalone and console-friendly.
    app = cdk.App(analytics_reporting=False)
    try:
        build_app(app)
    except JobSpecError as err:
        print(f"spot-trainer: {err}", file=sys.stderr)
        sys.exit(2)
    for stack in app.synth().stacks:
        if warning := too_large_warning(stack.stack_name, stack.template, has_assets=bool(stack.assets)):
            print(f"spot-trainer: WARNING: {warning}", file=sys.stderr)


if __name__ == "__main__":
    main()
