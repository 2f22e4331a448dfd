from pathlib import Path

import pytest

from spot_trainer.agent.instance.config import ConfigError, config_from_env, parse_env_file


def test_env_file_round_trips_into_typed_config(tmp_path: Path) -> None:
    env_file = tmp_path / "agent.env"
    env_file.write_text(
        "# written by user data\n"
        "SPOT_JOB=cifar\nSPOT_BUCKET=ckpt-bucket\n"
        'SPOT_COMMAND="python train.py --epochs 3"\n'
        "SPOT_GRACE_SECONDS=90\nSPOT_REACT_TO_REBALANCE=true\nSPOT_RESTART_BUDGET=5\n"
    )
    config = config_from_env(parse_env_file(env_file))
    assert config.command == "python train.py --epochs 3"
    assert config.grace_seconds == 90.0
    assert config.react_to_rebalance is True
    assert config.restart_budget == 5


def test_missing_required_setting_is_named() -> None:
    with pytest.raises(ConfigError, match="SPOT_BUCKET"):
        config_from_env({"SPOT_JOB": "a", "SPOT_COMMAND": "builtin"})


def test_malformed_number_is_named() -> None:
    env = {"SPOT_JOB": "a", "SPOT_BUCKET": "b", "SPOT_COMMAND": "builtin", "SPOT_RESTART_BUDGET": "x"}
    with pytest.raises(ConfigError, match="SPOT_RESTART_BUDGET='x' is not a valid int"):
        config_from_env(env)
