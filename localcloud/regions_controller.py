"""The home stack's regions controller (a job of several regions) as the local spot cloud plays it: its own code,
run in this process with the environment it is deployed with and its role's credentials, every few seconds (AWS:
every minute), with the job's region_wait scaled down to the local cloud's pace."""

from __future__ import annotations

import contextlib
import io
import os
import time
from dataclasses import dataclass

import boto3

from localcloud.cloud import Deployment, LocalCloud
from localcloud.instance import STATIC_CREDENTIALS
from localcloud.roles import assume, lambda_environment
from localcloud.run_options import RunOptions
from spot_trainer.capacity import region_controller

HANDLER = "spot_trainer.capacity.region_controller.handler"
# The controller runs every few seconds here, where AWS runs it every minute: its backoffs and its placement-score
# poll (minutes on AWS) run this many times faster, so one local run plays a sweep of several regions.
LOCAL_PACE = 30.0


@dataclass
class RegionsController:
    cloud: LocalCloud
    deployment: Deployment  # home's
    options: RunOptions
    _due_at: float = 0.0
    _env: dict[str, str] | None = None
    _last: str = ""

    def tick(self) -> None:
        """Run the function once it is due; a move, or a new reason to stay, goes to the cloud's log."""
        if time.monotonic() < self._due_at:
            return
        self._due_at = time.monotonic() + self.options.watch_seconds
        if self._env is None:
            self._env = self._deployed_env()
        deployer = {k: v for k, v in self.cloud.aws_env.items() if k not in STATIC_CREDENTIALS}
        with contextlib.ExitStack() as stack:
            stack.enter_context(_environ({**deployer, **self._env, "REGION_WAIT": self.options.region_wait,
                                          "LOCAL_PACE": str(LOCAL_PACE), "QUIET_SECONDS": "6",
                                          "AWS_DEFAULT_REGION": self.deployment.region}))
            stack.enter_context(contextlib.redirect_stdout(io.StringIO()))  # its log line is the one below
            outcome = region_controller.handler({}, None)
        action = outcome.partition(":")[0]
        if action == "move" or "switched to" in outcome or (action != self._last and action != "stay"):
            self.cloud.log(f"regions controller: {outcome}")  # a decision, not each minute's restatement of it
        self._last = action

    def _deployed_env(self) -> dict[str, str]:
        functions = self.cloud.client("lambda", self.deployment.region).list_functions()["Functions"]
        (found,) = [f for f in functions if f.get("Handler") == HANDLER
                    and f.get("Environment", {}).get("Variables", {}).get("JOB") == self.deployment.job]
        credentials = lambda_environment(assume(self.cloud.client("sts"), found["Role"], found["FunctionName"]))
        return {**found["Environment"]["Variables"], **credentials}


@contextlib.contextmanager
def _environ(values: dict[str, str]):  # type: ignore[no-untyped-def]
    """The function's environment for one run; boto3's default session re-reads it."""
    saved = dict(os.environ)
    os.environ.update(values)
    boto3.DEFAULT_SESSION = None
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        boto3.DEFAULT_SESSION = None
