"""Rendering of versioned user data: header after the shebang, literal deploy-time values, v1 frozen."""

from __future__ import annotations

import base64
import gzip
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from aws_cdk import App, CfnParameter, Stack

from stacks.instance import user_data
from stacks.instance.user_data import UserDataError, render_user_data


def test_header_follows_the_shebang_and_quotes_plain_values() -> None:
    text = render_user_data("v1", {"SPOT_JOB": "demo", "SPOT_COMMAND": "python train.py --name 'x y' $HOME"})
    lines = text.splitlines()
    assert lines[0].startswith("#!") and "--- rendered by Spot Trainer" in lines[1]
    script = text.split("# --- end of header ---")[0] + 'printf "%s|%s" "$SPOT_JOB" "$SPOT_COMMAND"\n'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out == "demo|python train.py --name 'x y' $HOME"


def deployed(part: object, typed: str) -> str:
    """What CloudFormation puts in place of an intrinsic: the value a console user typed, or its base64."""
    if isinstance(part, str):
        return part
    assert isinstance(part, dict)
    return base64.b64encode(typed.encode()).decode() if "Fn::Base64" in part else typed


def header_at_boot(version: str, typed: str, marker: Path) -> subprocess.CompletedProcess[str]:
    stack = Stack(App(), "S")
    param = CfnParameter(stack, "Cmd", type="String")
    line = user_data.export_line("SPOT_COMMAND", param.value_as_string, version)
    parts = stack.resolve(line)["Fn::Join"][1]
    shell = "".join(deployed(p, typed) for p in parts)
    return subprocess.run(["bash", "-c", shell + '\nprintf "%s" "$SPOT_COMMAND"'], capture_output=True,
                          text=True, cwd=marker.parent)


HOSTILE = "echo \"it's\" $(rm -rf /) `x`"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_token_values_stay_literal(version: str, tmp_path: Path) -> None:
    result = header_at_boot(version, HOSTILE, tmp_path / "marker")
    assert result.returncode == 0 and result.stdout == HOSTILE


def test_from_v2_no_typed_value_can_end_the_header_and_run_at_boot(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    typed = f"python train.py\nSPOT_TRAINER_VALUE\n)\ntouch {marker}\nx=$(cat <<'E'\n"
    result = header_at_boot("v2", typed, marker)
    assert not marker.exists(), "a console value ran as a command at boot"
    assert result.returncode == 0 and result.stdout == typed.rstrip("\n")


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


# A file of this repository as the scripts name it.
_REPO_FILE = re.compile(r"(?<![\w.-])(spot_trainer|stacks|userdata|localcloud)(/[\w<>.-]+)+\.(py|sh)\b")
_PACKED_BODY = re.compile(r"printf %s '([A-Za-z0-9+/=]+)' \| base64 -d \| gzip -dc")


def files_named(text: str, version: str) -> set[str]:
    return {match.group(0).replace("<version>", version) for match in _REPO_FILE.finditer(text)}


def shipped_text(version: str) -> str:
    """What an instance receives: the rendered user data, its packed body unpacked."""
    rendered = render_user_data(version, {"SPOT_JOB": "demo"})
    return rendered + "".join(gzip.decompress(base64.b64decode(packed)).decode()
                              for packed in _PACKED_BODY.findall(rendered))


@pytest.mark.parametrize("version", [v for v in user_data.available_versions() if v != "v1"])
def test_every_file_the_user_data_names_exists(version: str) -> None:
    # v1 is frozen byte for byte and names the 0.1 runtime's files, which this checkout no longer has.
    sources = [user_data.script_path(version), *user_data.part_paths(version)]
    named = files_named(shipped_text(version), version) | {
        name for path in sources for name in files_named(path.read_text(), version)}
    root = user_data.USERDATA_ROOT.parent
    assert named and sorted(name for name in named if not (root / name).is_file()) == []
