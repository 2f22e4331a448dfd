"""Command line: `python -m trainer agent | train | status`.

Every failure a user can cause (a bad setting, a wrong bucket, no credentials) ends in one line on
stderr naming what is wrong: exit 2 for bad configuration or usage, 3 when the job itself failed
(FAILED: do not restart), 1 when AWS could not be reached or the lease was lost (restart and wait).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_BAD_CONFIG = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["train"]:  # the built-in trainer owns its own flags and messages
        from trainer.train import main as train_main

        return train_main(args[1:])
    parser = build_parser()
    options = parser.parse_args(args)
    try:
        return options.run(options)
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer", description="Spot Trainer runtime")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{agent,train,status}")
    agent = commands.add_parser("agent", help="supervise training on this instance (config: SPOT_* env)")
    agent.add_argument("--env-file", type=Path, help="KEY=VALUE file, read over the environment")
    agent.set_defaults(run=run_agent)
    commands.add_parser("train", help="the built-in resumable trainer (see `train --help`)")
    status = commands.add_parser("status", help="where a job stands: state, step, interruptions")
    status.add_argument("--job", required=True)
    status.add_argument("--bucket", required=True)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    status.add_argument("--region", default=region)
    status.add_argument("--json", action="store_true", help="print status.json as JSON")
    status.set_defaults(run=run_status)
    return parser


def fail(message: str, code: int) -> int:
    print(f"spot-trainer: {message}", file=sys.stderr, flush=True)
    return code


def run_agent(options: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from trainer.agent import AgentError, check_config
    from trainer.config import ConfigError, config_from_env, parse_env_file

    try:
        env = dict(os.environ)
        if options.env_file is not None:
            env.update(parse_env_file(options.env_file))
        config = config_from_env(env)
        check_config(config)
    except ConfigError as error:
        return fail(f"bad configuration: {error}", EXIT_BAD_CONFIG)
    except OSError as error:
        return fail(f"cannot read {options.env_file}: {error.strerror or error}", EXIT_BAD_CONFIG)
    try:
        from trainer.agent import install_stop_handlers

        agent = build_agent(config)
        install_stop_handlers(agent)
        try:
            return agent.run()
        finally:
            if agent.clients.cloud is not None:
                agent.clients.cloud.close()
    except AgentError as error:
        return fail(str(error), 1)
    except (ClientError, BotoCoreError, RuntimeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return fail(f"cannot work with s3://{config.bucket}/{config.job}: {first}", 1)


def build_agent(config):  # type: ignore[no-untyped-def]
    """Wire the agent to real clients (endpoints from AWS_ENDPOINT_URL and the IMDS override)."""
    import boto3
    from botocore.config import Config

    from trainer.agent import Agent, Clients
    from trainer.cloudwatch import CloudWatchSink
    from trainer.imds import ImdsClient
    from trainer.lease import Lease
    from trainer.remote import RemoteStore
    from trainer.s3client import client_config, s3_client

    imds = ImdsClient()
    instance_id = config.instance_id or _instance_id_from(imds)
    s3 = s3_client(region=config.region)
    session = boto3.session.Session()
    aws = {"region_name": config.region, "config": client_config(max_attempts=4)}
    # Telemetry gives up fast: an unreachable endpoint must not delay a shutdown under a notice.
    quick = {"region_name": config.region, "config": Config(retries={"mode": "adaptive", "max_attempts": 2},
                                                            connect_timeout=2, read_timeout=5)}
    cloud = CloudWatchSink(
        logs=session.client("logs", **quick),
        metrics=session.client("cloudwatch", **quick),
        log_group=config.log_group or f"/spot-trainer/{config.job}",
        log_stream=instance_id,
        namespace=config.metrics_namespace,
        job=config.job,
    ).start()
    clients = Clients(
        store=RemoteStore(s3, config.bucket, config.job, keep=config.keep_checkpoints, instance=instance_id),
        lease=Lease(s3, config.bucket, config.job, owner=instance_id, ttl_seconds=config.lease_ttl_seconds),
        imds=imds,
        autoscaling=session.client("autoscaling", **aws),
        cloud=cloud,
    )
    return Agent(config=config, clients=clients, instance_id=instance_id)


def _instance_id_from(imds) -> str:  # type: ignore[no-untyped-def]
    try:
        return imds.instance_id()
    except Exception:  # not on EC2: the host name identifies this agent
        return f"{socket.gethostname()}-{os.getpid()}"


def run_status(options: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from trainer.remote import RemoteStore, RemoteStoreError
    from trainer.s3client import s3_client
    from trainer.status import STATUS_NAME, describe_job

    store = RemoteStore(s3_client(region=options.region, max_attempts=3), options.bucket, options.job)
    try:
        status = store.get_json(STATUS_NAME)
        if options.json:
            print(json.dumps(status or {}, indent=1))
            return 0 if status else 1
        print(describe_job(status, store.get_json("latest.json"), store.events()))
    except (RemoteStoreError, ClientError, BotoCoreError) as error:
        return fail(f"cannot read job {options.job!r} in bucket {options.bucket!r}: {error}", 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
