"""The job commands' flags; imports nothing but argparse, so `train` on a bare machine (no boto3) still starts."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

COMMANDS = ("status", "logs", "outputs", "pause", "resume")


def add_job_arguments(parser: argparse.ArgumentParser, *, bucket: bool = True) -> None:
    parser.add_argument("--job", required=True, help="the job's name: its stack is SpotTrainer-<job>")
    if bucket:
        parser.add_argument("--bucket", help="the job's checkpoint bucket, for a job whose stack is gone "
                                             "(default: the stack's CheckpointBucket output)")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
                        help="the job's region (default: AWS_REGION, else your AWS configuration's)")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    logs = commands.add_parser("logs", help="the job's log lines, every instance's, in time order")
    add_job_arguments(logs)
    logs.add_argument("--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    logs.add_argument("--since-minutes", type=float, default=None, help="only lines of the last N minutes")
    outputs = commands.add_parser("outputs", help="download the job's final outputs (or its newest checkpoint)")
    add_job_arguments(outputs)
    outputs.add_argument("--to", type=Path, help="an empty or new folder (default: ./<job>-outputs, or "
                                                 "./<job>-checkpoint with --checkpoint)")
    outputs.add_argument("--checkpoint", action="store_true", help="the newest published checkpoint instead")
    pause_ = commands.add_parser("pause", help="every node saves and uploads as on a spot notice, then the "
                                               "group goes to 0; nothing is deleted")
    add_job_arguments(pause_, bucket=False)
    resume_ = commands.add_parser("resume", help="the group back to the job's nodes: training goes on from "
                                                 "the newest checkpoint")
    add_job_arguments(resume_, bucket=False)
