"""The stack's capacity-watch Lambda as the local spot cloud plays it: its own code, run in this process
with the environment it is deployed with and its role's credentials, every few seconds (AWS: every minute)."""

from __future__ import annotations

import contextlib
import io
import os
import time
from dataclasses import dataclass
from unittest import mock

import boto3

from localcloud.cloud import LocalCloud
from localcloud.instance import STATIC_CREDENTIALS
from localcloud.roles import assume, lambda_environment
from spot_trainer.capacity import watch

QUIET = ("nothing to do", "spot is fine")  # the watch's answers that change nothing


@dataclass
class CapacityWatch:
    cloud: LocalCloud
    group: str  # the job's Auto Scaling group, as the deployed function's GROUP_NAME names it
    every_seconds: float = 2.0
    _due_at: float = 0.0
    _env: dict[str, str] | None = None  # the function's environment and credentials ({}: none deployed)

    def tick(self) -> None:
        """Run the function once it is due; a switch of the group's market goes to the cloud's log."""
        if time.monotonic() < self._due_at:
            return
        self._due_at = time.monotonic() + self.every_seconds
        if self._env is None:
            self._env = self._deployed_env()
        if not self._env:
            return  # the job has neither a deadline nor a max_spot_wait: no watch deployed
        deployer = {k: v for k, v in self.cloud.aws_env.items() if k not in STATIC_CREDENTIALS}
        with mock.patch.dict(os.environ, {**deployer, **self._env, "QUIET_SECONDS": "6"}):
            boto3.DEFAULT_SESSION = None  # its clients must read this environment
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # its log line is the one below
                    outcome = watch.handler({}, None)
            finally:
                boto3.DEFAULT_SESSION = None
        if outcome not in QUIET:
            self.cloud.log(f"capacity watch: group switched to on-demand ({outcome})")

    def _deployed_env(self) -> dict[str, str]:
        functions = self.cloud.client("lambda").list_functions()["Functions"]
        found = [f for f in functions if f.get("Handler") == "index.handler"  # not the regions controller
                 and f.get("Environment", {}).get("Variables", {}).get("GROUP_NAME") == self.group]
        if not found:
            return {}
        credentials = lambda_environment(assume(self.cloud.client("sts"), found[0]["Role"], found[0]["FunctionName"]))
        return {**found[0]["Environment"]["Variables"], **credentials}
