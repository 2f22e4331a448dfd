"""The agent's and the status command's entry points, wired to real AWS clients.

Every failure a user can cause (a bad setting, a wrong bucket, no credentials) ends in one line on
stderr naming what is wrong: exit 2 for bad configuration or usage, 3 when the job itself failed
(FAILED: do not restart), 1 when AWS could not be reached or the lease was lost (restart and wait).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ..aws_names import bucket_name_problem, log_group_name
from ..costs.budget import outlook
from ..costs.cost_text import describe_cost, describe_outlook
from ..costs.job_cost import stored_job_cost
from ..costs.lost_instances import Losses
from ..costs.spend_meter import SpendMeter
from ..costs.spot_prices import Ec2SpotPrices, NoPrices, PriceError, RegionalPrices, SpotPriceSource
from ..storage.s3.job_regions import REGION, parse_job_buckets
from ..storage.s3.lease import Lease
from ..storage.s3.s3client import client_config, s3_client
from ..storage.steps.remote import RemoteStore, RemoteStoreError
from .fatal import disk_error, disk_fix, end_job_as_failed
from .instance.config import ENV_NAMES, AgentConfig, ConfigError, check_config, config_from_env, parse_env_file
from .instance.imds import ImdsClient
from .instance.setting_names import unread_setting_warnings
from .node.endings import EXIT_FAILED
from .program.secret_values import SecretError, secret_environment
from .records.boot_times import describe_boots
from .records.cloudwatch import CloudWatchSink
from .records.failed_starts import SAME_FAILURES, FailedStarts
from .records.instance_record import InstanceRecord, instance_facts, price_source
from .records.log_lines import agent_line, route_runtime_warnings
from .records.status import STATUS_NAME, describe_job, state_and_reason
from .supervisor import Agent, AgentError, Clients, install_stop_handlers

EXIT_BAD_CONFIG = 2


def fail(message: str, code: int) -> int:
    agent_line(message)
    return code


def give_up(env: dict[str, str], env_file: Path | None, message: str, code: int) -> int:
    """A condition no restart can fix: say why, end the job FAILED and stop paying for it."""
    fail(message, code)
    if env_file is not None:
        try:
            env = {**env, **parse_env_file(env_file, strict=False)}
        except OSError:
            pass
    end_job_as_failed(env, message, agent_line)
    return code


def failed_start(env: dict[str, str], env_file: Path | None, message: str, started: float) -> int:
    """Exit 1, for systemd to restart the agent; the same failure at every start ends the job instead
    (failed_starts.py): never a silent loop."""
    count = FailedStarts.beside(env_file).count(message, time.monotonic() - started)
    if count < SAME_FAILURES:
        return fail(message, 1)
    return give_up(env, None, f"{message} (the agent failed so at {count} starts in a row: a restart does not "
                              "mend it)", EXIT_FAILED)


def run_agent(options: argparse.Namespace) -> int:
    started = time.monotonic()
    env = dict(os.environ)
    from_file: dict[str, str] = {}
    try:
        if options.env_file is not None:
            from_file = parse_env_file(options.env_file)
            env.update(from_file)
        config = config_from_env(env)
        check_config(config)
    except ConfigError as error:
        return give_up(env, options.env_file, f"bad configuration: {error}", EXIT_BAD_CONFIG)
    except OSError as error:
        return give_up(env, None, f"cannot read {options.env_file}: {error.strerror or error}", EXIT_BAD_CONFIG)
    try:
        config = with_secrets(config)
    except SecretError as error:
        if error.final:
            return give_up(env, None, str(error), EXIT_FAILED)
        return failed_start(env, options.env_file, str(error), started)
    try:
        agent = build_agent(config, env)
        route_runtime_warnings(agent.log)
        for warning in unread_setting_warnings(from_file, ENV_NAMES):
            agent.log(f"WARNING: {warning}")
        install_stop_handlers(agent)
        record = start_instance_record(agent, env)
        try:
            code = agent.run()
            FailedStarts.beside(options.env_file).clear()
            return code
        finally:
            if record is not None:
                record.stop()
            if agent.clients.cloud is not None:
                agent.clients.cloud.close()
    except AgentError as error:
        return failed_start(env, options.env_file, str(error), started)
    except (ClientError, BotoCoreError, RuntimeError) as error:  # S3 or the network: a restart may help
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        message = f"cannot work with s3://{config.bucket}/{config.job}: {first}"
        if "NoSuchBucket" in first:  # no restart creates the bucket: stop paying for the instance
            return give_up(env, None, message, EXIT_FAILED)
        if (disk := disk_error(error)) is not None:  # a replacement has the same disk: stop paying for it
            return give_up(env, None, f"{first}: {disk_fix(disk)}", EXIT_FAILED)
        return failed_start(env, options.env_file, message, started)
    except Exception as error:  # a disk that broke under us, a bug: every restart would end the same
        traceback.print_exc()
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return give_up(env, None, f"agent stopped by {type(error).__name__}: {first}", EXIT_FAILED)


def with_secrets(config: AgentConfig) -> AgentConfig:
    """The job's secrets in the command's extra environment (secret_values.py), read in the job's region."""
    session = boto3.session.Session()
    values = secret_environment(config.secrets, lambda service: session.client(
        service, region_name=config.region, config=client_config(max_attempts=4)))
    return dataclasses.replace(config, extra_env={**config.extra_env, **values}) if values else config


def build_agent(config: AgentConfig, env: Mapping[str, str]) -> Agent:
    """Wire the agent to real clients (endpoints from AWS_ENDPOINT_URL and the IMDS override)."""
    imds = ImdsClient()
    instance_id = config.instance_id or _instance_id_from(imds)
    # One session for every client: its credentials (the instance role's, from IMDS) are fetched once and shared,
    # not once per client, where a slow metadata answer would leave one client with none.
    session = boto3.session.Session()
    s3 = s3_client(region=config.region, session=session)
    aws = {"region_name": config.region, "config": client_config(max_attempts=4)}
    # Telemetry gives up fast: an unreachable endpoint must not delay a shutdown under a notice.
    quick = {"region_name": config.region, "config": Config(retries={"mode": "adaptive", "max_attempts": 2},
                                                            connect_timeout=2, read_timeout=5)}
    cloud = CloudWatchSink(
        logs=session.client("logs", **quick),
        metrics=session.client("cloudwatch", **quick),
        log_group=config.log_group or log_group_name(config.job),
        log_stream=instance_id,
        namespace=config.metrics_namespace,
        job=config.job,
    ).start()
    regions = parse_job_buckets(config.job_buckets)
    # A job of several regions keeps one lease, in home's bucket: an agent of any region waits for it, so two
    # regions never train at once, and each start sees the newest step wherever it was saved.
    lease_s3, lease_bucket = (s3_client(region=regions.home, session=session), regions.buckets[regions.home]) \
        if regions else (s3, config.bucket)
    clients = Clients(
        store=RemoteStore(s3, config.bucket, config.job, keep=config.keep_checkpoints, instance=instance_id),
        lease=Lease(lease_s3, lease_bucket, config.job, owner=instance_id, ttl_seconds=config.lease_ttl_seconds),
        imds=imds,
        autoscaling=session.client("autoscaling", **aws),
        cloud=cloud,
        sns=session.client("sns", **quick) if config.notify_topic else None,
        prices=budget_prices(session.client("ec2", **aws), env) if config.budget_usd else None,
        other_regions={region: RemoteStore(s3_client(region=region, session=session), bucket, config.job,
                                           instance=instance_id)
                       for region, bucket in regions.others(config.region).items()} if regions else {},
    )
    return Agent(config=config, clients=clients, instance_id=instance_id)


def budget_prices(ec2: object, env: Mapping[str, str]) -> SpotPriceSource:
    """The price source the spending cap reads (a bad trace file: every question gets why)."""
    try:
        return price_source(ec2, env.get("SPOT_PRICE_TRACE", ""))
    except PriceError as error:
        return NoPrices(str(error))


def start_instance_record(agent: Agent, env: Mapping[str, str]) -> InstanceRecord | None:
    """This instance's record (what it is, how long it ran: the job's cost) and its SpendUSD metric.
    Without instance metadata (a laptop) or with a bad price trace there is no record; training goes on."""
    config, cloud = agent.config, agent.clients.cloud
    try:
        facts = instance_facts(agent.clients.imds, env)
        ec2 = boto3.session.Session().client("ec2", region_name=config.region, config=client_config(max_attempts=2))
        meter = SpendMeter(facts.instance_type, facts.az, facts.market,
                           price_source(ec2, env.get("SPOT_PRICE_TRACE", "")))
    except Exception as error:
        agent.log(f"no instance record (the job's cost will miss this instance): {error}")
        return None

    def step() -> int | None:
        reporter = agent.telemetry.reporter
        return reporter.status.step if reporter is not None else None

    return InstanceRecord(agent.clients.store, facts, meter=meter, step=step, log=agent.log,
                          checkpoint=lambda: agent.newest_on_disk,
                          on_spend=(lambda usd: cloud.metric("SpendUSD", usd, "None")) if cloud else None,
                          ).start(config.heartbeat_seconds)


def _instance_id_from(imds: ImdsClient) -> str:
    try:
        return imds.instance_id()
    except Exception:  # not on EC2: the host name identifies this agent
        return f"{socket.gethostname()}-{os.getpid()}"


def run_status(options: argparse.Namespace) -> int:
    if problem := bucket_name_problem(options.bucket):
        return fail(f"--bucket {problem}", EXIT_BAD_CONFIG)
    if not options.job.strip() or "/" in options.job:
        return fail(f"--job {options.job!r} is not a job name (the name in its job file, e.g. cifar)", EXIT_BAD_CONFIG)
    if options.region is not None and not REGION.match(options.region):
        return fail(f"--region {options.region!r} is not an AWS region name (like us-east-1)", EXIT_BAD_CONFIG)
    store = RemoteStore(s3_client(region=options.region, max_attempts=3), options.bucket, options.job)
    # A job of several regions: its record where it runs, its instances and events in every region's bucket
    others = [RemoteStore(s3_client(region=region, max_attempts=3), bucket, options.job)
              for region, bucket in getattr(options, "other_regions", [])]
    try:
        status = store.get_json(STATUS_NAME)
        events = sorted((e for each in (store, *others) for e in each.events()), key=lambda e: e.get("epoch") or 0)
        prices, now = spot_prices(options.region), time.time()
        if others:
            prices = RegionalPrices({r: spot_prices(r) for r, _ in options.other_regions}, prices)
        cost = stored_job_cost(store, events, (status or {}).get("state"), prices, now=now, elsewhere=others)
        ahead = outlook(status or {}, cost, prices, now=now)
        if options.json:
            print(json.dumps({**as_told(status or {}, events, cost.losses), "cost": cost.to_dict(),
                              "outlook": ahead.to_dict()}, indent=1))
            return 0 if status else 1
        print(describe_job(status, store.read_latest()[0], events, cost.losses))
        print("\n".join([*describe_cost(cost), *describe_outlook(ahead), *describe_boots(events)]))
    except (RemoteStoreError, ClientError, BotoCoreError) as error:
        return fail(f"cannot read job {options.job!r} in bucket {options.bucket!r}: {error}", 1)
    return 0


def as_told(status: dict[str, Any], events: Sequence[Mapping[str, Any]], losses: Losses) -> dict[str, Any]:
    """status.json as the text tells it: the state a pause moved the job to, and every lost instance counted (the
    agents' own counter sees only the notices they answered, a pause's stops among them)."""
    if not status:
        return status
    state, reason = state_and_reason(status, list(events))
    return {**status, "state": state, "reason": reason, "interruptions": len(losses.lost)}


def spot_prices(region: str | None) -> SpotPriceSource:
    """EC2's spot price history in the job's region (endpoint from AWS_ENDPOINT_URL, like S3's)."""
    try:
        ec2 = boto3.session.Session().client("ec2", region_name=region, config=client_config(max_attempts=2),
                                             endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
    except (BotoCoreError, ValueError) as error:  # no region: EC2 prices are per region
        return NoPrices(f"cannot read the EC2 spot price history: {error} (give --region)")
    return Ec2SpotPrices(ec2)
