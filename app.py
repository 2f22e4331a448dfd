#!/usr/bin/env python3
"""CDK entry point: `-c job=NAME` (jobs/NAME.toml, or a path) → one SpotTrainingStack."""

from __future__ import annotations

import sys

# isort: off
from stacks.synth.node_version import NODE_LINE  # first: aws_cdk starts the jsii runtime on node as it is imported
import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
# isort: on

from stacks.job.spec import JobSpecError
from stacks.job_file import parse_job, read_job_file
from stacks.region_stacks import region_stacks
from stacks.synth.notice_fit import grace_warning
from stacks.synth.summary import summary_lines
from stacks.synth.template_size import too_large_warning
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
    for line in summary_lines(job):  # the notice's line is a warning when the grace period does not fit
        prefix = "WARNING: " if line == grace_warning(job) else ""
        print(f"spot-trainer: {prefix}{line}", file=sys.stderr)
    places = region_stacks(job)
    stacks = [SpotTrainingStack(app, place.name, job=job, place=place) for place in places]
    for away in stacks[1:]:  # `cdk deploy SpotTrainer-NAME` brings up the regions it may move to first
        stacks[0].add_stack_dependency(away)
    if len(places) > 1:
        regions = ", ".join(str(place.region) for place in places)
        print(f"spot-trainer: NOTE: job {job.name} has a stack in each of {len(places)} regions ({regions}; home "
              f"{places[0].region}): deploy and destroy them together with --all", file=sys.stderr)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stacks[0]


def main() -> None:
    # Version reporting and path metadata off: the template stays standalone and console-friendly.
    app = cdk.App(analytics_reporting=False)
    if NODE_LINE:
        print(f"spot-trainer: NOTE: {NODE_LINE}", file=sys.stderr)
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
