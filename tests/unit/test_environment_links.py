"""An environment archive holding a link that leads out of venv/ and lib/, by `..`, absolutely or through
a chain of links, is refused in one line, whichever tool unpacks it, and the instance installs instead;
the venv's own links (to its base Python, `lib64 -> lib`) are kept."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from spot_trainer.environment.restore import PLAN_FILE, Boot, restore
from tests.unit.test_environment_extract import EACH_TOOL, fake_cli, hostile, unpacked

VENV = [("venv/bin", "dir", ""), ("venv/bin/python3", "symlink", sys.executable), ("venv/bin/python", "symlink",
        "python3"), ("venv/lib", "dir", ""), ("venv/lib/python3/site-packages", "dir", ""), ("lib", "dir", "")]
CASES = {
    "relative, out by ..": ([("venv/x", "symlink", "../../../../tmp")], "venv/x, a link to ../../../../tmp"),
    "absolute": ([("venv/lib/python3/site-packages/data", "symlink", "/tmp")],
                 "venv/lib/python3/site-packages/data, a link to /tmp"),
    "a chain of links inside": ([("venv/lib/python3/site-packages/up", "symlink", "../../.."),
                                 ("venv/lib/python3/site-packages/out", "symlink", "up/../../tmp")],
                                "venv/lib/python3/site-packages/out, a link to up/../../tmp"),
    "the venv itself": ([("lib/x", "file", "")], "venv, a link to /tmp"),
    "an interpreter link to a folder": ([("venv/bin/python3.11", "symlink", "/tmp")], "venv/bin/python3.11"),
}


@pytest.mark.parametrize("tool", EACH_TOOL)
@pytest.mark.parametrize("case", list(CASES))
def test_a_link_leading_out_is_refused_in_one_line(tool: str, case: str, tmp_path: Path) -> None:
    members, named = CASES[case]
    venv = [("venv", "symlink", "/tmp")] if case == "the venv itself" else VENV
    instance = tmp_path / "instance"
    (instance / "lib").mkdir(parents=True)
    (instance / "lib" / "kept.py").write_text("")
    _, refused = unpacked(hostile(venv + members), tool, instance)
    assert refused.startswith(f"the archive holds {named}") and refused.endswith("which leads out of venv and lib")
    assert sorted(p.name for p in instance.iterdir()) == ["lib"] and (instance / "lib" / "kept.py").exists()


@pytest.mark.parametrize("tool", EACH_TOOL)
def test_the_venv_s_own_links_are_kept(tool: str, tmp_path: Path) -> None:
    members = [*VENV, ("venv/lib64", "symlink", "lib"), ("venv/bin/python3.11", "symlink", "python3"),
               ("venv/lib/python3/site-packages/tool", "symlink", "../../../bin/python")]
    _, refused = unpacked(hostile(members), tool, tmp_path / "instance")
    assert refused == ""
    assert os.readlink(tmp_path / "instance" / "venv" / "lib64") == "lib"


def test_the_instance_installs_instead_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """restore() as user data runs it: the cache's record and archive through the aws CLI (a stand-in that
    serves them from a folder), the link refused, and the plan to build and store the environment written."""
    body = hostile([*VENV, ("venv/x", "symlink", "../../../../tmp")])
    served = tmp_path / "served"
    served.mkdir()
    (served / "archive").write_bytes(body)
    (served / "env.json").write_text(json.dumps({"sha256": hashlib.sha256(body).hexdigest(), "bytes": len(body)}))
    cli = (f'if [ "$1" = s3api ]; then cp {served}/env.json "$7"; echo \'{{"ETag": "\\"e1\\""}}\'; '
           f"else cat {served}/archive; fi")  # get-object --bucket B --key K FILE, or cp URI -
    monkeypatch.setenv("SPOT_AWS_CLI", fake_cli(tmp_path, cli))
    app, state = tmp_path / "app", tmp_path / "state"
    (app / "lib").mkdir(parents=True)
    state.mkdir()
    restored, line = restore(Boot(app_dir=app, state_dir=state, prefix="s3://b/job/env-cache/k1", key="k1"))
    assert restored is False and line == (
        "environment cache: s3://b/job/env-cache/k1/" + hashlib.sha256(body).hexdigest() + ".tar.gz does not unpack "
        "(the archive holds venv/x, a link to ../../../../tmp, which leads out of venv and lib); installing instead")
    assert sorted(p.name for p in app.iterdir()) == ["lib"]
    assert json.loads((state / PLAN_FILE).read_text())["replacing_etag"] == '"e1"'
