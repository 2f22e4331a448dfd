"""The agent's own settings and the checks it makes before touching anything."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from spot_trainer.agent.config import AgentConfig, ConfigError, check_config, config_from_env
from spot_trainer.agent.supervisor import newest_local_checkpoint

BASE = {"SPOT_JOB": "j", "SPOT_BUCKET": "bucket-b", "SPOT_COMMAND": "builtin"}


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
    ({"train_args": "--model 'lm"}, "SPOT_TRAIN_ARGS cannot be parsed as shell words"),
    ({"stop_signal": "SIGKILL"}, "SPOT_STOP_SIGNAL='SIGKILL' cannot be caught"),
    ({"region": "us-east-1 "}, "SPOT_REGION='us-east-1 ' is not an AWS region name"),
    ({"bucket": "My_Bucket"}, "SPOT_BUCKET: 'My_Bucket' is not an S3 bucket name"),
    ({"command": "builtin;"}, "SPOT_COMMAND='builtin;': the built-in trainer is exactly"),
    ({"command": "python a.py\x00 --fast"}, "SPOT_COMMAND holds a control character"),
    ({"distributed": True, "min_nodes": 3, "max_nodes": 2},
     "SPOT_MIN_NODES=3 is out of range (1 to SPOT_MAX_NODES=2; in the console, MinNodes at most Nodes)"),
])
def test_settings_the_agent_cannot_act_on_are_named(change: dict, message: str) -> None:
    config = dataclasses.replace(AgentConfig(job="j", bucket="bucket-b", command="builtin"), **change)
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_config(config)


def test_newest_local_checkpoint_ignores_temporaries_and_other_files(tmp_path: Path) -> None:
    assert newest_local_checkpoint(tmp_path / "missing") is None
    for name in ("step-00000009", "step-10", ".tmp-step-11-x", "step-12.partial", "notes.txt"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "state.pt").write_bytes(b"weights")
    assert newest_local_checkpoint(tmp_path) == (10, tmp_path / "step-10")


@pytest.mark.parametrize("typed", ["builtin ", " builtin", "builtin\t"])
def test_a_command_with_stray_spaces_is_still_the_builtin_trainer(typed: str) -> None:
    # `bash -c "builtin "` exits 0 at once: the job would end DONE after zero steps.
    assert config_from_env({**BASE, "SPOT_COMMAND": typed}).command == "builtin"


def test_a_blank_command_is_missing() -> None:
    with pytest.raises(ConfigError, match="missing required setting SPOT_COMMAND"):
        config_from_env({**BASE, "SPOT_COMMAND": "   "})
