"""Run the real CDK CLI (npx cdk, pinned in package.json) against a moto server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from localcloud.moto_server import MotoServer

REPO = Path(__file__).resolve().parents[2]


def cdk(*args: str, server: MotoServer, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **server.env(),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "AWS_EC2_METADATA_DISABLED": "true",
        "CDK_DISABLE_VERSION_CHECK": "1",
    }
    result = subprocess.run(["npx", "--no-install", "cdk", *args], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"cdk {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result
