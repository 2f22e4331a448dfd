"""Rendering of versioned user data: header after the shebang, literal deploy-time values, v1 frozen."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from aws_cdk import App, CfnParameter, Stack

from stacks import user_data
from stacks.user_data import UserDataError, render_user_data


def test_header_follows_the_shebang_and_quotes_plain_values() -> None:
    text = render_user_data("v1", {"SPOT_JOB": "demo", "SPOT_COMMAND": "python train.py --name 'x y' $HOME"})
    lines = text.splitlines()
    assert lines[0].startswith("#!") and "--- rendered by Spot Trainer" in lines[1]
    script = text.split("# --- end of header ---")[0] + 'printf "%s|%s" "$SPOT_JOB" "$SPOT_COMMAND"\n'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out == "demo|python train.py --name 'x y' $HOME"


def test_token_values_become_literal_here_documents() -> None:
    stack = Stack(App(), "S")
    param = CfnParameter(stack, "Cmd", type="String")
    line = user_data.export_line("SPOT_COMMAND", param.value_as_string)
    resolved = stack.resolve(line)  # what CloudFormation substitutes: here the value a console user typed
    parts = resolved["Fn::Join"][1]
    shell = "".join(p if isinstance(p, str) else "echo \"it's\" $(rm -rf /) `x`" for p in parts)
    out = subprocess.run(["bash", "-c", shell + '\nprintf "%s" "$SPOT_COMMAND"'], capture_output=True,
                         text=True, check=True).stdout
    assert out == "echo \"it's\" $(rm -rf /) `x`"


def test_adding_a_version_leaves_v1_rendering_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = {"SPOT_USERDATA_VERSION": "v1", "SPOT_JOB": "demo"}
    before = render_user_data("v1", header)
    shutil.copytree(user_data.USERDATA_ROOT, tmp_path / "userdata")
    (tmp_path / "userdata" / "v9").mkdir()
    (tmp_path / "userdata" / "v9" / "bootstrap.sh").write_text("#!/usr/bin/env bash\necho v9\n")
    monkeypatch.setattr(user_data, "USERDATA_ROOT", tmp_path / "userdata")
    assert user_data.available_versions() == ["v1", "v2", "v9"]
    assert render_user_data("v1", header) == before
    assert render_user_data("v9", {"SPOT_JOB": "demo"}).endswith("echo v9\n")


def test_unknown_version_and_bad_names_are_refused_by_name() -> None:
    with pytest.raises(UserDataError, match=r"user data version 'v9' not found; available: v1, v2"):
        render_user_data("v9", {})
    with pytest.raises(UserDataError, match=r"header variable 'spot-job' must be UPPER_SNAKE_CASE"):
        render_user_data("v1", {"spot-job": "x"})
