"""Node.js as the CDK's libraries judge it, said in one line of text.

The CDK CLI (package.json's aws-cdk) accepts Node >= 18, but the jsii runtime under aws-cdk-lib supports
Node 22 and 24 only (its release table in jsii/_embedded/jsii/bin__jsii-runtime.js; Node 20's end of
life was 2026-10-30) and draws a banner for an older one, which its Python side relays as byte strings.
Imported before aws_cdk starts that runtime, this module quiets the banner for the node on PATH (the
runtime's own JSII_SILENCE_WARNING_* variables, per major version) and keeps the line to say instead;
a version quieted already on purpose gets no line either.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import MutableMapping

SUPPORTED = (22, 24)
QUIETED = ("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION")


def node_major(version: str) -> int | None:
    """`v20.20.2` → 20."""
    match = re.match(r"v?(\d+)\.", version.strip())
    return int(match.group(1)) if match else None


def support_line(major: int) -> str | None:
    if major in SUPPORTED:
        return None
    return (f"Node.js {major} runs the CDK here, but the CDK's libraries support Node.js "
            f"{' and '.join(map(str, SUPPORTED))}: synth and deploy work, upgrade when you can")


def quiet_jsii_banner(env: MutableMapping[str, str] = os.environ) -> str | None:
    """Quiet the runtime's banner for this node's major version; the line that says it instead, if any."""
    node = shutil.which("node", path=env.get("PATH"))
    if node is None:
        return None  # the CDK then says itself that it needs node
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    major = node_major(version)
    if major is None or (line := support_line(major)) is None:
        return None
    if str(major) in env.get(QUIETED[0], "").replace(" ", "").split(","):
        return None  # quieted on purpose already (as the runtime reads its variable): say nothing either
    for name in QUIETED:
        env[name] = ",".join(filter(None, [env.get(name, ""), str(major)]))
    return line


NODE_LINE = quiet_jsii_banner()  # on import: before any aws_cdk import starts the runtime
