"""Command line: `spot-trainer agent | train | status | logs | outputs | pause | resume` (or
`python -m spot_trainer ...`).

Each command imports only its own room: `train` the built-in program (torch), `agent` the agent and
storage (boto3, no torch), the job commands spot_trainer/ops/. Exit codes are the agent's (see spot_trainer.agent.cli).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .ops import arguments as job_arguments


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["train"]:  # the built-in trainer owns its own flags and messages
        from .builtin.loop import main as train_main

        return train_main(args[1:])
    options = build_parser().parse_args(args)
    try:
        if options.command == "agent":
            from .agent import cli

            return cli.run_agent(options)
        from .ops import cli as job_commands

        return job_commands.run(options)
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spot-trainer", description="Spot Trainer: the agent on an instance, and a job's commands by name "
        "(bucket, group and log group from the stack SpotTrainer-<job>, in your AWS region and credentials)")
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="{agent,train,status,logs,outputs,pause,resume}")
    agent = commands.add_parser("agent", help="supervise training on this instance (config: SPOT_* env)")
    agent.add_argument("--env-file", type=Path, help="KEY=VALUE file, read over the environment")
    commands.add_parser("train", help="the built-in resumable trainer (see `train --help`)")
    status = commands.add_parser("status", help="where a job stands: state, step, interruptions, cost, "
                                                "its group and dashboard")
    job_arguments.add_job_arguments(status)
    status.add_argument("--json", action="store_true",
                        help="print status.json and the job's cost (\"cost\") as one JSON object")
    status.add_argument("--plot", type=Path, metavar="FILE.svg",
                        help="also draw the job's life into FILE.svg: steps over time, each instance by market, "
                             "interruptions, redone work, spend against the cap (needs matplotlib)")
    job_arguments.add_commands(commands)
    return parser


if __name__ == "__main__":
    sys.exit(main())
