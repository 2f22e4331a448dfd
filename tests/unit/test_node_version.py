"""Node.js support is judged as the CDK's libraries judge it: a supported node says nothing, another gets one
line of text and the runtime's banner quieted for it, and a version already quieted on purpose stays quiet."""

from __future__ import annotations

import os
from pathlib import Path

from stacks.synth.node_version import node_major, quiet_jsii_banner, support_line


def fake_node(folder: Path, version: str) -> dict[str, str]:
    node = folder / "node"
    node.write_text(f"#!/bin/sh\necho {version}\n")
    node.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}/usr/bin:/bin"}


def test_versions_read_and_judged() -> None:
    assert node_major("v20.20.2\n") == 20 and node_major("garbage") is None
    assert support_line(22) is None and support_line(24) is None
    assert support_line(20) == ("Node.js 20 runs the CDK here, but the CDK's libraries support Node.js 22 and 24: "
                                "synth and deploy work, upgrade when you can")


def test_an_old_node_gets_one_line_and_its_banner_quieted(tmp_path: Path) -> None:
    env = fake_node(tmp_path, "v20.20.2")
    assert quiet_jsii_banner(env) == support_line(20)
    assert env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] == "20"
    assert env["JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"] == "20"


def test_a_supported_or_deliberately_quieted_node_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    supported = fake_node(tmp_path / "a", "v22.11.0")
    assert quiet_jsii_banner(supported) is None and "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" not in supported
    (tmp_path / "b").mkdir()
    quieted = {**fake_node(tmp_path / "b", "v20.1.0"), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "18, 20"}
    assert quiet_jsii_banner(quieted) is None
