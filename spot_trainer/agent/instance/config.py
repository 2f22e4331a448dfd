"""The agent's configuration: one environment file shared by user data, systemd and the agent.

User data writes `KEY=VALUE` lines (systemd `EnvironmentFile=` syntax); the agent reads the same
names from its environment, so there is exactly one place where a setting is spelled.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from ...aws_names import JOB_NAME, JOB_NAME_RULE, bucket_name_problem
from ...builtin_arguments import arguments_problem, total_steps
from ...capacity.policy import parse_deadline, parse_duration
from ...command_text import Program, has_control_character, shadows_builtin
from ...settings import NO_DEFAULT, SETTINGS, agent_default, agent_env_names
from ...signals import STOP_SIGNALS, UNCATCHABLE, builtin_stop_problem, parse_signal
from ...storage.s3.job_regions import REGION, parse_job_buckets
from .env_file import read_env_text


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names it."""


@dataclass(frozen=True)
class AgentConfig:
    """What the agent acts on: each setting's SPOT_* name, default and meaning are in the settings table
    (settings.py); extra_env is not a setting."""

    job: str
    bucket: str
    command: str
    region: str = agent_default("region")
    workdir: str = agent_default("workdir")
    checkpoint_dir: str = agent_default("checkpoint_dir")
    asg_name: str = agent_default("asg_name")
    log_group: str = agent_default("log_group")
    grace_seconds: float = agent_default("grace_seconds")
    restart_budget: int = agent_default("restart_budget")
    react_to_rebalance: bool = agent_default("react_to_rebalance")
    keep_checkpoints: int = agent_default("keep_checkpoints")
    poll_seconds: float = agent_default("poll_seconds")
    lease_ttl_seconds: float = agent_default("lease_ttl_seconds")
    stop_signal: str = agent_default("stop_signal")
    instance_id: str = agent_default("instance_id")
    metrics_namespace: str = agent_default("metrics_namespace")
    train_args: str = agent_default("train_args")
    lifecycle_hook: str = agent_default("lifecycle_hook")
    bootstrap_log: str = agent_default("bootstrap_log")
    status_interval_seconds: float = agent_default("status_interval_seconds")
    save_warn_seconds: float = agent_default("save_warn_seconds")
    distributed: bool = agent_default("distributed")
    min_nodes: int = agent_default("min_nodes")
    max_nodes: int = agent_default("max_nodes")
    procs_per_node: int = agent_default("procs_per_node")
    local_addr: str = agent_default("local_addr")
    rdzv_last_call_seconds: float = agent_default("rdzv_last_call_seconds")
    rdzv_keep_alive_seconds: float = agent_default("rdzv_keep_alive_seconds")
    notify_topic: str = agent_default("notify_topic")
    deadline: str = agent_default("deadline")
    total_steps: int = agent_default("total_steps")
    deadline_margin: str = agent_default("deadline_margin")
    stall_minutes: float = agent_default("stall_minutes")
    restart_on_stall: bool = agent_default("restart_on_stall")
    heartbeat_seconds: float = agent_default("heartbeat_seconds")
    deadline_check_seconds: float = agent_default("deadline_check_seconds")
    budget_usd: float = agent_default("budget_usd")
    budget_check_seconds: float = agent_default("budget_check_seconds")
    checkpoint_files: str = agent_default("checkpoint_files")  # comma-separated entries of checkpoint_dir
    job_buckets: str = agent_default("job_buckets")  # region=bucket,… (job_regions.py)
    secrets: str = agent_default("secrets")  # references only (secret_refs.py); values go to extra_env
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def program(self) -> Program:
        """The built-in trainer or the user's own command: every part of the agent asks this, never the text."""
        return Program(self.command)


# Environment variable → field name. Only these names are read; anything else is ignored.
ENV_NAMES: dict[str, str] = agent_env_names()
REQUIRED = tuple(name for name, attr in ENV_NAMES.items() if agent_default(attr) is NO_DEFAULT)


def _convert(env_name: str, raw: str, kind: type | str) -> object:
    kind_name = kind if isinstance(kind, str) else kind.__name__
    try:
        if kind_name == "bool":
            if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return raw.lower() in ("true", "1", "yes")
        if kind_name == "int":
            return int(raw)
        if kind_name == "float":
            number = float(raw)
            if not math.isfinite(number):  # "inf" seconds would wait forever, "nan" compares false to all
                raise ValueError
            return number
    except ValueError:
        expected = "finite number" if kind_name == "float" else kind_name
        raise ConfigError(f"{env_name}={raw!r} is not a valid {expected}") from None
    return raw


def known_total_steps(config: AgentConfig) -> int:
    """The job's size in steps: the job file's total_steps, else the built-in trainer's --steps; 0: unknown."""
    return config.total_steps or (total_steps(config.train_args) or 0 if config.program.builtin else 0)


def config_from_env(env: Mapping[str, str] | None = None) -> AgentConfig:
    """Build the config from environment variables, naming the first bad or missing one."""
    env = os.environ if env is None else env
    missing = [name for name in REQUIRED if not env.get(name, "").strip()]
    if missing:
        raise ConfigError(f"missing required setting {missing[0]} (agent environment file)")
    kinds = {f.name: f.type for f in fields(AgentConfig)}
    values: dict[str, object] = {}
    for env_name, attr in ENV_NAMES.items():
        if env_name in env and env[env_name] != "":
            values[attr] = _convert(env_name, env[env_name], kinds[attr])
    # "builtin " from a console field must not become `bash -c "builtin "`, which exits 0 at once.
    values["command"] = str(values["command"]).strip()
    return AgentConfig(**values)  # type: ignore[arg-type]


def parse_env_file(path: Path, *, strict: bool = True) -> dict[str, str]:
    """Read the agent's environment file as systemd reads it (env_file.py).
    Not `strict`: keep what can be read (to learn where to report a broken file)."""
    try:
        text = path.read_bytes().decode()
    except UnicodeDecodeError as error:
        if strict:
            raise ConfigError(f"{path} is not UTF-8 text (byte {error.start})") from None
        text = path.read_bytes().decode(errors="replace")
    env_file = read_env_text(text)
    if strict and env_file.errors:
        line, problem = env_file.errors[0]
        raise ConfigError(f"{path}:{line}: {problem}")
    return env_file.entries


SNS_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$")


def check_config(config: AgentConfig) -> None:
    """Reject settings the agent cannot act on, naming the variable, before anything starts."""
    try:
        stop = parse_signal(config.stop_signal)
    except ValueError:
        raise ConfigError(f"SPOT_STOP_SIGNAL={config.stop_signal!r} is not a signal name") from None
    if stop in UNCATCHABLE:
        raise ConfigError(f"SPOT_STOP_SIGNAL={config.stop_signal!r} cannot be caught, so the command could "
                          f"never save before it stops: use {', '.join(STOP_SIGNALS[:-1])} or {STOP_SIGNALS[-1]}")
    if config.program.builtin and (stop_problem := builtin_stop_problem(config.stop_signal)):
        raise ConfigError(f"SPOT_STOP_SIGNAL={config.stop_signal!r}: {stop_problem}")
    if not REGION.match(config.region):
        raise ConfigError(f"SPOT_REGION={config.region!r} is not an AWS region name (like us-east-1)")
    if problem := bucket_name_problem(config.bucket):
        raise ConfigError(f"SPOT_BUCKET: {problem}")
    try:
        parse_job_buckets(config.job_buckets)
    except ValueError as error:
        raise ConfigError(f"SPOT_JOB_BUCKETS: {error}") from None
    if not JOB_NAME.match(config.job):
        raise ConfigError(f"SPOT_JOB={config.job!r} is not a job name ({JOB_NAME_RULE}: the job file's name)")
    if config.notify_topic and not SNS_TOPIC_ARN.match(config.notify_topic):
        raise ConfigError(f"SPOT_NOTIFY_TOPIC={config.notify_topic!r} is not an SNS topic ARN "
                          "(arn:aws:sns:REGION:ACCOUNT:NAME)")
    if shadows_builtin(config.command):
        raise ConfigError(f"SPOT_COMMAND={config.command!r}: the built-in trainer is exactly \"builtin\" "
                          "(its arguments go in SPOT_TRAIN_ARGS); this would exit at once and end the job")
    for name, text in (("SPOT_COMMAND", config.command), ("SPOT_TRAIN_ARGS", config.train_args)):
        if has_control_character(text):
            raise ConfigError(f"{name} holds a control character: {text!r}")
    checks = [(s.env, getattr(config, s.attr), s.agent_floor.admits(getattr(config, s.attr)))
              for s in SETTINGS if s.agent_floor is not None]
    checks += [
        ("SPOT_LEASE_TTL_SECONDS", config.lease_ttl_seconds,
         config.lease_ttl_seconds > 2 * config.poll_seconds),
        ("SPOT_MIN_NODES", config.min_nodes, not config.distributed or 1 <= config.min_nodes <= config.max_nodes),
    ]
    for name, value, ok in checks:
        if not ok:
            hint = {"SPOT_LEASE_TTL_SECONDS": " (must exceed twice SPOT_POLL_SECONDS)",
                    "SPOT_MIN_NODES": f" (1 to SPOT_MAX_NODES={config.max_nodes}; in the console, MinNodes "
                                      "at most Nodes)"}.get(name, "")
            raise ConfigError(f"{name}={value!r} is out of range{hint}")
    _check_schedule(config)
    if not config.program.builtin and config.workdir and not Path(config.workdir).is_dir():
        raise ConfigError(f"SPOT_WORKDIR={config.workdir!r} is not a directory")
    _check_writable(Path(config.checkpoint_dir))
    if config.program.builtin:
        if problem := arguments_problem(config.train_args):  # every start would fail the same way
            raise ConfigError(f"SPOT_TRAIN_ARGS: {problem}")
        return
    try:
        shlex.split(config.command)
    except ValueError as error:
        raise ConfigError(f"SPOT_COMMAND cannot be parsed as shell words ({error}): {config.command!r}") from None


def _check_schedule(config: AgentConfig) -> None:
    """A deadline or margin the policy cannot read would only show once training ran for hours."""
    for name, parse in (("SPOT_DEADLINE", lambda text: parse_deadline(text, 0.0)),
                        ("SPOT_DEADLINE_MARGIN", parse_duration)):
        text = getattr(config, ENV_NAMES[name])
        try:
            if text:
                parse(text)
        except ValueError as error:
            raise ConfigError(f"{name}: {error}") from None


def _check_writable(directory: Path) -> None:
    """The checkpoint directory must take a file now, not after training ran for an hour."""
    probe = directory / f".spot-trainer-probe-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ConfigError(f"SPOT_CHECKPOINT_DIR={str(directory)!r} is not a writable directory "
                          f"({error.strerror or error})") from None
