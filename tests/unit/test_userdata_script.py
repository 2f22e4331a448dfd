"""The bootstrap script on its own: lint, its contract with the agent, size, quoting, bad headers."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import Fn

from spot_trainer.agent.failed_record import failed_record
from spot_trainer.agent.instance.config import ENV_NAMES, parse_env_file
from stacks.instance.user_data import (
    MAX_USER_DATA_BYTES,
    USERDATA_ROOT,
    available_versions,
    render_user_data,
    script_body,
    script_path,
)
from stacks.job.spec import CURRENT_USERDATA_VERSION
from tests.support.userdata_sandbox import REPO_ROOT, STAND_INS, UserDataSandbox, job_header

CURRENT = script_path(CURRENT_USERDATA_VERSION)


def bash_scripts() -> list[Path]:
    stand_ins = [p for p in sorted(STAND_INS.iterdir()) if p.read_text().startswith("#!/usr/bin/env bash")]
    shared_parts = sorted((USERDATA_ROOT / "lib").glob("*.sh"))
    return [script_path(v) for v in available_versions()] + shared_parts + stand_ins


def test_bootstrap_scripts_and_stand_ins_are_shellcheck_clean() -> None:
    scripts = bash_scripts()
    assert CURRENT in scripts and STAND_INS / "systemctl" in scripts and STAND_INS / "nvidia-smi" in scripts
    shellcheck = Path(sys.executable).parent / "shellcheck"
    result = subprocess.run([str(shellcheck), "--severity=info", *map(str, scripts)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("version", [v for v in available_versions() if v != "v1"])
def test_each_assembled_script_is_shellcheck_clean_as_one_script(version: str) -> None:
    # Each part is checked alone above, with the globals they share allowed; here, as the instance runs them.
    shellcheck = Path(sys.executable).parent / "shellcheck"
    script = script_path(version).read_text().partition("\n")[0] + "\n" + script_body(version)
    result = subprocess.run([str(shellcheck), "--severity=info", "-"], input=script, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_stand_ins_are_executable() -> None:
    for path in STAND_INS.iterdir():
        assert path.stat().st_mode & 0o111, path


def test_v1_agent_settings_are_exactly_the_agents_env_names() -> None:
    # v2 writes every SPOT_* setting (tests/integration/test_userdata_bootstrap.py checks the file).
    match = re.search(r"^AGENT_SETTINGS=\(([^)]*)\)", script_path("v1").read_text(), re.MULTILINE)
    assert match, "AGENT_SETTINGS list not found"
    written = set(match.group(1).split()) | {"SPOT_BOOTSTRAP_LOG"}  # the one the script sets itself
    # Several-node settings came after v1, which is frozen: a distributed job on v1 is refused at synth.
    after_v1 = {"SPOT_DISTRIBUTED", "SPOT_MIN_NODES", "SPOT_MAX_NODES", "SPOT_PROCS_PER_NODE", "SPOT_LOCAL_ADDR",
                "SPOT_RDZV_LAST_CALL_SECONDS", "SPOT_RDZV_KEEP_ALIVE_SECONDS",
                # and so did operations: notifications, deadlines, instance records
                "SPOT_NOTIFY_TOPIC", "SPOT_DEADLINE", "SPOT_TOTAL_STEPS", "SPOT_DEADLINE_MARGIN",
                "SPOT_HEARTBEAT_SECONDS", "SPOT_DEADLINE_CHECK_SECONDS",
                # and the hang watchdog (the stall alarm alone on v1)
                "SPOT_STALL_MINUTES", "SPOT_RESTART_ON_STALL",
                # and the spending cap (refused at synth on v1)
                "SPOT_BUDGET_USD", "SPOT_BUDGET_CHECK_SECONDS",
                # and the first-save wait (refused at synth on v1 when set)
                "SPOT_SAVE_WARN_SECONDS",
                # and secrets by reference (v1's frozen header cannot carry them: refused at synth)
                "SPOT_SECRETS",
                # and the checkpoint's own names (refused at synth on v1 when set)
                "SPOT_CHECKPOINT_FILES",
                # and several regions (refused at synth on v1)
                "SPOT_JOB_BUCKETS"}
    assert set(ENV_NAMES) - after_v1 <= written, f"the env file would miss {set(ENV_NAMES) - after_v1 - written}"
    assert set(match.group(1).split()) <= set(ENV_NAMES), "a name the agent does not read"


def test_rendered_user_data_with_long_deploy_time_values_stays_far_below_the_limit() -> None:
    uri = "s3://" + "b" * 63 + "/cdk-assets/" + "0123456789abcdef" * 4
    header = job_header(
        "b" * 63, uri + ".whl",
        SPOT_COMMAND="torchrun --standalone --nproc-per-node 8 -m my_project.train --config configs/large.yaml",
        SPOT_TRAIN_ARGS="--model resnet --data s3://" + "d" * 63 + "/cifar10 --steps 200000 --batch-size 256"
        " --checkpoint-every-seconds 300 --lr 0.1 --seed 1234",
        SPOT_SETUP_COMMAND="pip install --quiet -r requirements.txt && python scripts/prepare_data.py --cache /data",
        SPOT_CODE_URI=uri + ".zip",
        # Deploy-time values arrive as tokens, which render as quoted here-documents.
        SPOT_BUCKET=Fn.ref("CheckpointsBucket"), SPOT_REGION=Fn.ref("AWS::Region"),
    )
    size = len(render_user_data(CURRENT_USERDATA_VERSION, header).encode())
    assert size < MAX_USER_DATA_BYTES - 2048, f"{size} bytes leaves too little room below 16 KiB"


def env_line(name: str, value: str) -> subprocess.CompletedProcess[str]:
    """The script's own env_line function, extracted and run alone."""
    source = re.search(r"^env_line\(\) \{.*?^\}", script_body(CURRENT_USERDATA_VERSION), re.MULTILINE | re.DOTALL)
    assert source
    program = f"set -Eeuo pipefail\nREASON=/dev/stderr\nfail() {{ echo \"$*\" >&2; return 1; }}\n{source.group(0)}\n" \
              'env_line "$1" "$2"'
    return subprocess.run(["bash", "-c", program, "env_line", name, value], capture_output=True, text=True)


@pytest.mark.parametrize(
    "value",
    ['python train.py --note "it\'s quoted"', "cost '$5' and ${HOME} and `date`", r"C:\path\ends\ ",
     "a=b # not a comment", ""],
)
def test_env_file_lines_read_back_as_written(tmp_path: Path, value: str) -> None:
    written = env_line("SPOT_COMMAND", value)
    assert written.returncode == 0, written.stderr
    (tmp_path / "agent.env").write_text(written.stdout)
    assert parse_env_file(tmp_path / "agent.env") == {"SPOT_COMMAND": value}


def test_multi_line_value_is_refused_by_name() -> None:
    written = env_line("SPOT_TRAIN_ARGS", "--a\n--b")
    assert written.returncode != 0 and written.stderr.strip() == "SPOT_TRAIN_ARGS must be a single line"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"SPOT_TRAINER_PACKAGE": ""}, "header variable SPOT_TRAINER_PACKAGE is missing or empty"),
        ({"SPOT_GRACE_SECONDS": "two minutes"}, "SPOT_GRACE_SECONDS='two minutes' is not a number of seconds"),
    ],
)
def test_bad_header_fails_first_step_with_one_clear_line(tmp_path: Path, override: dict, message: str) -> None:
    # No AWS and no IMDS are reachable here: SPOT_AWS_CLI=false fails every S3 call at once.
    sandbox = UserDataSandbox(tmp_path / "instance", {}, "http://127.0.0.1:9", {"SPOT_AWS_CLI": "false"})
    header = job_header("ckpt", "spot-trainer==0.2.0", **override)
    result = sandbox.run(render_user_data(CURRENT_USERDATA_VERSION, header), timeout=60)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and errors[0].endswith(f"[check-header]: ERROR (exit 1): {message}")
    assert "Traceback" not in result.stderr
    status = json.loads(sandbox.status_file.read_text())
    assert status["state"] == "FAILED" and status["bootstrap"]["step"] == "check-header"
    assert status["reason"] == f"bootstrap step check-header: {message}"
    assert not sandbox.unit_file.exists()



def test_a_failure_before_the_runtime_is_installed_records_what_the_agent_records(tmp_path: Path) -> None:
    sandbox = UserDataSandbox(tmp_path / "instance", {}, "http://127.0.0.1:9", {"SPOT_AWS_CLI": "false"})
    header = job_header("ckpt", "spot-trainer==0.2.0", SPOT_TRAINER_PACKAGE="")
    assert sandbox.run(render_user_data(CURRENT_USERDATA_VERSION, header), timeout=60).returncode != 0
    status = json.loads(sandbox.status_file.read_text())
    assert set(status) == set(failed_record(None, "cifar", "unknown", status["reason"])) | {"bootstrap"}
    assert (status["state"], status["failures"]) == ("FAILED", 1)


PREVIOUS = {"job": "cifar", "state": "INTERRUPTED", "step": 740, "checkpoint_step": 700, "loss": 0.5, "attempt": 3,
            "interruptions": 2, "failures": 1, "first_started_at": 1.8e9, "warning": "saves nothing"}


@pytest.mark.parametrize("runtime_installed", [True, False])
def test_the_bootstrap_records_failed_as_the_agent_does(tmp_path: Path, runtime_installed: bool) -> None:
    """The script's own failed_record function, run alone: the runtime's code once it is installed (a
    python3 that cannot run stands in the fallback's way), else the fallback; the same record either way."""
    lib = tmp_path / "lib"
    lib.mkdir()
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    if runtime_installed:
        (lib / "spot_trainer").symlink_to(REPO_ROOT / "spot_trainer")
        (stand_in / "python3").write_text("#!/bin/sh\nexit 97\n")
        (stand_in / "python3").chmod(0o755)
    status = tmp_path / "status.json"
    status.write_text(json.dumps(PREVIOUS))
    source = re.search(r"^failed_record\(\) \{.*?^\}", script_body(CURRENT_USERDATA_VERSION), re.MULTILINE | re.DOTALL)
    assert source
    env = {"LIB_DIR": str(lib), "PYTHON": sys.executable, "PATH": f"{stand_in}:/usr/bin:/bin"}
    result = subprocess.run(["bash", "-c", f'{source.group(0)}\nfailed_record "$@"', "failed_record", str(status),
                             "job-code", "no zip", "1", "i-1", "cifar"], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    written = json.loads(status.read_text())
    expected = {**failed_record(PREVIOUS, "cifar", "i-1", "bootstrap step job-code: no zip"),
                "bootstrap": {"step": "job-code", "exit_code": 1}}
    assert written.pop("updated_at") and expected.pop("updated_at")
    assert written == expected and written["failures"] == 2


# A stack deployed with `userdata_version = "v1"` renders this script into every instance it launches,
# and the runtime it starts (spot-trainer 0.1) reads exactly the settings it writes: v1 never changes,
# a change goes into a new version. sha256 of userdata/v1/bootstrap.sh as frozen.
V1_SHA256 = "d9707f75523d773ddb20e148d572f1f56e671b57d771161f507deb09bde24744"


def test_v1_is_frozen_byte_for_byte() -> None:
    assert hashlib.sha256(script_path("v1").read_bytes()).hexdigest() == V1_SHA256, \
        "userdata/v1 is frozen: put the change into a new version (userdata/v3) instead"
