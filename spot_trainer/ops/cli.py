"""The job commands' flags and their runs: each finds the job, does one thing, and says it in a line or
a few; every problem is one line on stderr (exit 2: bad input, 1: the job or AWS is not as asked)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import boto3

from ..storage.s3.job_regions import REGION
from .aws_access import NO_REGION, client
from .job_stack import JobStack, check_job_name, find_job_stack, job_by_bucket
from .logs import print_logs
from .outputs import check_destination, download_checkpoint, download_final
from .pause import group_wish, pause, resume
from .plot_command import check_plot_path, write_plot
from .problem import JobProblem
from .regions_status import read_place, region_lines, where_it_runs


def region_of(option: str | None) -> str:
    """The region given, else the one the user's AWS configuration names; checked for its shape."""
    region = option or boto3.session.Session().region_name or ""
    if region and not REGION.match(region):
        raise JobProblem(f"--region {region!r} is not an AWS region name (like us-east-1)")
    return region


def locate(options: argparse.Namespace) -> JobStack:
    """The job's resources: from --bucket when given (no region needed for S3), else its stack's outputs."""
    check_job_name(options.job)
    region = region_of(options.region)
    if getattr(options, "bucket", None):
        return job_by_bucket(options.job, options.bucket, region)
    if not region:
        raise JobProblem(NO_REGION)
    return find_job_stack(client("cloudformation", region), options.job, region)


def run(options: argparse.Namespace) -> int:
    try:
        code = {"status": run_status, "logs": run_logs, "outputs": run_outputs, "pause": run_pause_or_resume,
                "resume": run_pause_or_resume}[options.command](options)
        sys.stdout.flush()  # a reader gone (`| head`) is met here, not in the interpreter's last flush
        return code
    except JobProblem as problem:
        print(f"spot-trainer {options.command}: {problem}", file=sys.stderr)
        return problem.code
    except BrokenPipeError:
        return reader_gone()


def reader_gone() -> int:
    """The reader of stdout left (`spot-trainer status --job x | head -1`): stop quietly, as `git log | head`
    does, with the status of a process ended by SIGPIPE. stdout goes to /dev/null so that the interpreter's
    last flush finds no pipe to fail on (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def run_status(options: argparse.Namespace) -> int:
    """The job's record and cost (spot_trainer/agent/cli.py), then its group and dashboard."""
    from ..agent import cli

    if options.plot is not None:
        check_plot_path(options.plot)
    home = locate(options)
    place = read_place(client("s3", home.region or None), home.bucket, home.job)
    job = where_it_runs(home, place)
    options.bucket, options.region = job.bucket, job.region or None
    if place is not None:  # its instances and events in every region's bucket
        options.other_regions = [(region, seen.bucket) for region, seen in place.regions.items()
                                 if region != job.region and seen.bucket]
    code = cli.run_status(options)
    if code == 0 and not options.json:
        lines = [*(region_lines(place) if place is not None else []), *group_lines(job)]
        print("\n".join(line.replace(job.dashboard_url, home.dashboard_url) for line in lines))
    if code == 0 and options.plot is not None:
        print(write_plot(job, options.plot, place))
    return code


def run_logs(options: argparse.Namespace) -> int:
    job = located_where_it_runs(options)  # a job of several regions: the log group of the region it runs in
    since = 0 if options.since_minutes is None else int((time.time() - options.since_minutes * 60) * 1000)
    printed = print_logs(client("logs", job.region), job.log_group, since_ms=since, follow=options.follow,
                         emit=lambda line: print(line, flush=True))
    if not printed and not options.follow:
        print(f"(no log lines in {job.log_group} yet)", file=sys.stderr)
    return 0


def run_outputs(options: argparse.Namespace) -> int:
    folder = options.to or Path(f"{options.job}-{'checkpoint' if options.checkpoint else 'outputs'}")
    check_destination(folder)
    job = located_where_it_runs(options)
    s3 = client("s3", job.region)
    if options.checkpoint:
        step, path = download_checkpoint(s3, job, folder)
        print(f"checkpoint step {step} of job {job.job!r} in {path}, every file checked against its manifest")
        return 0
    files = download_final(s3, job, folder)
    print(f"{len(files)} final output file(s) of job {job.job!r} in {folder}, each checked against S3's ETag")
    return 0


def run_pause_or_resume(options: argparse.Namespace) -> int:
    job = located_where_it_runs(options)
    change = pause if options.command == "pause" else resume
    print(change(client("s3", job.region), client("autoscaling", job.region), job))
    return 0


def located_where_it_runs(options: argparse.Namespace) -> JobStack:
    """The job by name, as the region it runs in holds it (for a job of several regions, not always home)."""
    home = locate(options)
    return where_it_runs(home, read_place(client("s3", home.region or None), home.bucket, home.job))


def group_lines(job: JobStack) -> list[str]:
    """For `status`: the group's wish (paused or not) and the dashboard; nothing for a stack that is gone."""
    if not job.group:
        return []
    wish = group_wish(client("s3", job.region), client("autoscaling", job.region), job)
    return [wish, f"dashboard: {job.dashboard_url}"]

