"""The agent's own settings and the checks it makes before touching anything."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from spot_trainer.agent.instance.config import ENV_NAMES, AgentConfig, ConfigError, check_config, config_from_env
from spot_trainer.agent.instance.setting_names import unread_setting_warnings
from spot_trainer.storage.saves import layouts

TRAIN_ARGS = "--model lm --synthetic --steps 10"
BASE = {"SPOT_JOB": "job", "SPOT_BUCKET": "bucket-b", "SPOT_COMMAND": "builtin", "SPOT_TRAIN_ARGS": TRAIN_ARGS}


def test_lifecycle_hook_and_status_interval_are_read() -> None:
    config = config_from_env({**BASE, "SPOT_LIFECYCLE_HOOK": "drain", "SPOT_STATUS_INTERVAL": "5"})
    assert (config.lifecycle_hook, config.status_interval_seconds) == ("drain", 5.0)
    check_config(config)


@pytest.mark.parametrize(("change", "message"), [
    ({"stop_signal": "SIGWHAT"}, "SPOT_STOP_SIGNAL='SIGWHAT' is not a signal name"),
    ({"grace_seconds": -1.0}, "SPOT_GRACE_SECONDS=-1.0 is out of range"),
    ({"poll_seconds": 0.0}, "SPOT_POLL_SECONDS=0.0 is out of range"),
    ({"keep_checkpoints": 0}, "SPOT_KEEP_CHECKPOINTS=0 is out of range"),
    ({"command": "python 'unclosed"}, "SPOT_COMMAND cannot be parsed"),
    ({"train_args": "--model 'lm"}, "SPOT_TRAIN_ARGS: cannot be parsed as shell words"),
    ({"train_args": "--model lm --synthetic --steps abc"}, "SPOT_TRAIN_ARGS: argument --steps: invalid"),
    ({"train_args": ""}, "SPOT_TRAIN_ARGS: the built-in trainer needs --model, --steps and --data or --synthetic"),
    ({"train_args": TRAIN_ARGS + " --checkpoint-dir /tmp/elsewhere"}, "SPOT_TRAIN_ARGS: leave out --checkpoint-dir"),
    ({"job": "my job/../x"}, "SPOT_JOB='my job/../x' is not a job name"),
    ({"job": "Cifar"}, "SPOT_JOB='Cifar' is not a job name"),
    ({"notify_topic": "my-topic"}, "SPOT_NOTIFY_TOPIC='my-topic' is not an SNS topic ARN"),
    ({"stop_signal": "SIGKILL"}, "SPOT_STOP_SIGNAL='SIGKILL' cannot be caught"),
    ({"stop_signal": "SIGUSR1"}, "SPOT_STOP_SIGNAL='SIGUSR1': the built-in trainer saves on SIGTERM or SIGINT only"),
    ({"region": "us-east-1 "}, "SPOT_REGION='us-east-1 ' is not an AWS region name"),
    ({"bucket": "My_Bucket"}, "SPOT_BUCKET: 'My_Bucket' is not an S3 bucket name"),
    ({"command": "builtin;"}, "SPOT_COMMAND='builtin;': the built-in trainer is exactly"),
    ({"command": "python a.py\x00 --fast"}, "SPOT_COMMAND holds a control character"),
    ({"distributed": True, "min_nodes": 3, "max_nodes": 2},
     "SPOT_MIN_NODES=3 is out of range (1 to SPOT_MAX_NODES=2; in the console, MinNodes at most Nodes)"),
])
def test_settings_the_agent_cannot_act_on_are_named(change: dict, message: str) -> None:
    config = dataclasses.replace(AgentConfig(job="job", bucket="bucket-b", command="builtin", train_args=TRAIN_ARGS),
                                 **change)
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(config)


def test_newest_local_checkpoint_ignores_temporaries_and_other_files(tmp_path: Path) -> None:
    assert layouts.newest_complete(tmp_path / "missing") is None
    for name in ("step-00000009", "step-10", ".tmp-step-11-x", "step-12.partial", "notes.txt"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "state.pt").write_bytes(b"weights")
    newest = layouts.newest_complete(tmp_path)
    assert newest is not None and (newest.step, newest.path) == (10, tmp_path / "step-10")


@pytest.mark.parametrize("typed", ["builtin ", " builtin", "builtin\t"])
def test_a_command_with_stray_spaces_is_still_the_builtin_trainer(typed: str) -> None:
    # `bash -c "builtin "` exits 0 at once: the job would end DONE after zero steps.
    assert config_from_env({**BASE, "SPOT_COMMAND": typed}).command == "builtin"


def test_a_blank_command_is_missing() -> None:
    with pytest.raises(ConfigError, match="missing required setting SPOT_COMMAND"):
        config_from_env({**BASE, "SPOT_COMMAND": "   "})


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999"])
def test_a_number_of_seconds_must_be_finite(value: str) -> None:
    # inf seconds of grace would hold a dying instance's shutdown forever; nan passes no range check.
    with pytest.raises(ConfigError, match=re.escape(f"SPOT_GRACE_SECONDS={value!r} is not a valid finite number")):
        config_from_env({**BASE, "SPOT_GRACE_SECONDS": value})


def test_a_topic_arn_and_a_one_letter_job_name_are_accepted(tmp_path: Path) -> None:
    config = config_from_env({**BASE, "SPOT_JOB": "ab", "SPOT_CHECKPOINT_DIR": str(tmp_path),
                              "SPOT_NOTIFY_TOPIC": "arn:aws:sns:us-east-1:123456789012:spot-trainer-cifar"})
    check_config(config)


def test_a_misspelt_setting_is_warned_about_with_the_one_it_likely_means() -> None:
    names = ["SPOT_REGOIN", "SPOT_REGION", "SPOT_STACK", "SPOT_SOMETHING_NEW", "HF_STEPS"]
    assert unread_setting_warnings(names, ENV_NAMES) == [
        "SPOT_REGOIN is not a setting this agent reads (did you mean SPOT_REGION?); it is ignored",
        "SPOT_SOMETHING_NEW is not a setting this agent reads; it is ignored"]


def test_every_spot_name_the_runtime_or_user_data_reads_is_known() -> None:
    """User data writes every SPOT_* variable of the boot into the agent's file: a name the stack, the local
    spot cloud, user data or the runtime uses but missing here would be warned about as a typo on every start."""
    root = Path(__file__).resolve().parents[2]
    sources = [*(root / "spot_trainer").rglob("*.py"), *(root / "stacks").rglob("*.py"),
               *(root / "localcloud").rglob("*.py"), *(root / "userdata").rglob("*.sh"),
               *(root / "localcloud" / "bin").iterdir()]
    read = {name for path in sources for name in re.findall(r"\bSPOT_[A-Z0-9_]+", path.read_text())}
    assert unread_setting_warnings(sorted(read - {"SPOT_TRAINER_VALUE"}), ENV_NAMES) == []
