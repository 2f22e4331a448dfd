"""Command line: `python -m spot_trainer agent | train | status`.

Each command imports only its own room: `train` the built-in program (torch), `agent` and `status`
the agent and storage (boto3, no torch). Exit codes are the agent's (see trainer.agent.cli).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["train"]:  # the built-in trainer owns its own flags and messages
        from .builtin.loop import main as train_main

        return train_main(args[1:])
    options = build_parser().parse_args(args)
    from .agent import cli

    run = cli.run_agent if options.command == "agent" else cli.run_status
    try:
        return run(options)
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m spot_trainer", description="Spot Trainer runtime")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{agent,train,status}")
    agent = commands.add_parser("agent", help="supervise training on this instance (config: SPOT_* env)")
    agent.add_argument("--env-file", type=Path, help="KEY=VALUE file, read over the environment")
    commands.add_parser("train", help="the built-in resumable trainer (see `train --help`)")
    status = commands.add_parser("status", help="where a job stands: state, step, interruptions, cost")
    status.add_argument("--job", required=True)
    status.add_argument("--bucket", required=True)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    status.add_argument("--region", default=region)
    status.add_argument("--json", action="store_true",
                        help="print status.json and the job's cost (\"cost\") as one JSON object")
    return parser


if __name__ == "__main__":
    sys.exit(main())
