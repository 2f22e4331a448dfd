"""Area 3: one bad line in the agent's environment file, every AWS endpoint on a closed port."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from hostile.judging import AWS_OFFLINE, Probe, judge_agent


@dataclass(frozen=True)
class EnvCase:
    case: str
    expect: str  # the setting (or file problem) the first line must name
    values: dict[str, str]  # settings replaced or added, written KEY=VALUE with the value verbatim
    raw: bytes = b""  # bytes appended as they are
    env_file: str | None = None  # "{dir}"-relative path given to --env-file instead of the written file


def number_cases(name: str, *values: str) -> list[EnvCase]:
    return [EnvCase(f"{name}={value}", name, {name: value}) for value in values]


def env_cases() -> list[EnvCase]:
    builtin = {"SPOT_COMMAND": "builtin"}
    distributed = {"SPOT_DISTRIBUTED": "true", "SPOT_MAX_NODES": "3"}
    return [
        *number_cases("SPOT_GRACE_SECONDS", "ninety", "-5", "inf"),
        *number_cases("SPOT_RESTART_BUDGET", "-1", "2.5"),
        *number_cases("SPOT_KEEP_CHECKPOINTS", "three", "0"),
        *number_cases("SPOT_POLL_SECONDS", "0"),
        *number_cases("SPOT_LEASE_TTL_SECONDS", "0.3"),
        *number_cases("SPOT_STATUS_INTERVAL", "nan"),
        *number_cases("SPOT_TOTAL_STEPS", "abc", "-5"),
        EnvCase("SPOT_TOTAL_STEPS=0 with a deadline, own command", "SPOT_TOTAL_STEPS",
                {"SPOT_TOTAL_STEPS": "0", "SPOT_DEADLINE": "36h"}),
        EnvCase("SPOT_MIN_NODES=0 (distributed)", "SPOT_MIN_NODES", {**distributed, "SPOT_MIN_NODES": "0"}),
        EnvCase("SPOT_PROCS_PER_NODE=0", "SPOT_PROCS_PER_NODE", {"SPOT_PROCS_PER_NODE": "0"}),
        EnvCase("SPOT_DISTRIBUTED=maybe", "SPOT_DISTRIBUTED", {"SPOT_DISTRIBUTED": "maybe"}),
        EnvCase("SPOT_REACT_TO_REBALANCE=on", "SPOT_REACT_TO_REBALANCE", {"SPOT_REACT_TO_REBALANCE": "on"}),
        *(EnvCase(f"SPOT_STOP_SIGNAL={s}", "SPOT_STOP_SIGNAL", {"SPOT_STOP_SIGNAL": s})
          for s in ("SIGNOPE", "SIGKILL", "9")),
        EnvCase("SPOT_REGION=Mars", "SPOT_REGION", {"SPOT_REGION": "Mars"}),
        EnvCase("SPOT_REGION='us-east-1 ' (quoted space)", "SPOT_REGION", {"SPOT_REGION": "'us-east-1 '"}),
        EnvCase("SPOT_BUCKET=My_Bucket", "SPOT_BUCKET", {"SPOT_BUCKET": "My_Bucket"}),
        EnvCase("SPOT_BUCKET=s3://some-bucket", "SPOT_BUCKET", {"SPOT_BUCKET": "s3://some-bucket"}),
        EnvCase("SPOT_JOB empty", "SPOT_JOB", {"SPOT_JOB": ""}),
        EnvCase("SPOT_JOB='my job/../x'", "SPOT_JOB", {"SPOT_JOB": "'my job/../x'"}),
        EnvCase("SPOT_COMMAND=builtin;", "SPOT_COMMAND", {"SPOT_COMMAND": "builtin;"}),
        EnvCase("SPOT_COMMAND with an unbalanced quote", "SPOT_COMMAND",
                {"SPOT_COMMAND": "\"python train.py --name 'x\""}),
        EnvCase("SPOT_TRAIN_ARGS unparseable", "SPOT_TRAIN_ARGS", {**builtin, "SPOT_TRAIN_ARGS": "\"--model 'lm\""}),
        EnvCase("SPOT_TRAIN_ARGS --steps abc", "SPOT_TRAIN_ARGS",
                {**builtin, "SPOT_TRAIN_ARGS": "\"--model lm --synthetic --steps abc\""}),
        EnvCase("builtin without SPOT_TRAIN_ARGS", "SPOT_TRAIN_ARGS", builtin),
        EnvCase("SPOT_KEEP_CHECKPOINTS='3 (quote never closed)", "SPOT_KEEP_CHECKPOINTS",
                {"SPOT_KEEP_CHECKPOINTS": "'3"}),
        EnvCase("binary bytes in a value", "UTF-8", {}, raw=b"SPOT_REGION=\xff\xfe\n"),
        EnvCase("a line without '='", "SPOT_GRACE_SECONDS", {}, raw=b"SPOT_GRACE_SECONDS 60\n"),
        EnvCase("shell 'export' prefix", "SPOT_REGION", {}, raw=b"export SPOT_REGION=us-west-2\n"),
        EnvCase("misspelt setting SPOT_REGOIN", "SPOT_REGOIN", {"SPOT_REGOIN": "us-west-2"}),
        EnvCase("NUL byte in SPOT_COMMAND", "SPOT_COMMAND", {}, raw=b"SPOT_COMMAND=python\x00train.py\n"),
        EnvCase("SPOT_CHECKPOINT_DIR is a file", "SPOT_CHECKPOINT_DIR", {"SPOT_CHECKPOINT_DIR": "{dir}/a-file"}),
        EnvCase("SPOT_CHECKPOINT_DIR read-only (/proc)", "SPOT_CHECKPOINT_DIR",
                {"SPOT_CHECKPOINT_DIR": "/proc/hostile-inputs-ck"}),
        EnvCase("SPOT_WORKDIR missing", "SPOT_WORKDIR", {"SPOT_WORKDIR": "{dir}/no-such-dir"}),
        EnvCase("SPOT_DEADLINE=tomorrow", "SPOT_DEADLINE", {"SPOT_DEADLINE": "tomorrow"}),
        EnvCase("SPOT_DEADLINE_MARGIN=0m", "SPOT_DEADLINE_MARGIN", {"SPOT_DEADLINE_MARGIN": "0m"}),
        EnvCase("SPOT_NOTIFY_TOPIC not an ARN", "SPOT_NOTIFY_TOPIC", {"SPOT_NOTIFY_TOPIC": "my-topic"}),
        EnvCase("--env-file missing", "no-such.env", {}, env_file="{dir}/no-such.env"),
        EnvCase("--env-file is a folder", "{dir}", {}, env_file="{dir}"),
    ]


def env_file_bytes(case: EnvCase, folder: Path) -> bytes:
    settings = {"SPOT_JOB": "job", "SPOT_BUCKET": "some-bucket", "SPOT_COMMAND": "'python train.py'",
                "SPOT_CHECKPOINT_DIR": str(folder / "ck"), "SPOT_REGION": "us-east-1"}
    settings.update({k: v.format(dir=folder) for k, v in case.values.items()})
    return "".join(f"{k}={v}\n" for k, v in settings.items()).encode() + case.raw


def agent_probe(index: int, case: EnvCase, root: Path) -> Probe:
    folder = root / "agent" / f"{index:03d}"
    folder.mkdir(parents=True)
    (folder / "a-file").write_text("not a directory")
    path = folder / "agent.env"
    path.write_bytes(env_file_bytes(case, folder))
    env_file = str(path) if case.env_file is None else case.env_file.format(dir=folder)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), **AWS_OFFLINE}
    return Probe("agent", case.case, [sys.executable, "-m", "spot_trainer", "agent", "--env-file", env_file],
                 folder, env, case.expect.format(dir=folder), judge_agent)
