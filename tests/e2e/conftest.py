"""End-to-end fixtures: one local spot cloud (its own moto server) and one `cdk synth` of the example
job for the whole session; each scenario deploys that app with its own parameters, plays EC2 until
the agent scales the group to 0, and destroys the stack again."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from localcloud.cloud import Deployment, LocalCloud
from localcloud.iam_report import summary_lines
from localcloud.interruptions import InterruptionPlan
from localcloud.outages import SpotOutage
from localcloud.player import Player
from localcloud.run_options import RunOptions
from stacks.job.spec import JOBS_DIR
from tests.support.plain_jobs import WHERE, plain_job

JOB = "example"
CHECKPOINT_EVERY = 8
TOTAL_STEPS = 104
# Paced steps (0.3 s at least): a replacement boots while its predecessor still has a good third of
# the job to go, and the agent uploads each checkpoint well within one interval, on an idle machine
# as on a busy one. The first interruption lands mid-interval (step 104/5 ≈ 21).
PACE = "--min-step-seconds 0.3"
TRAIN_ARGS = (f"--model resnet --synthetic --steps {TOTAL_STEPS} --batch-size 16 --width 8 "
              f"--checkpoint-every-steps {CHECKPOINT_EVERY} --log-every 1 {PACE}")


@dataclass
class Scenario:
    cloud: LocalCloud
    deployment: Deployment
    player: Player

    def s3_json(self, name: str) -> Any:
        key = f"{self.deployment.job}/{name}"
        body = self.cloud.client("s3").get_object(Bucket=self.deployment.bucket, Key=key)["Body"]
        return json.loads(body.read())

    def events(self) -> list[dict[str, Any]]:
        s3 = self.cloud.client("s3")
        listing = s3.list_objects_v2(Bucket=self.deployment.bucket, Prefix=f"{self.deployment.job}/events/")
        keys = sorted(item["Key"] for item in listing.get("Contents", []))
        return [json.loads(s3.get_object(Bucket=self.deployment.bucket, Key=k)["Body"].read()) for k in keys]

    def group(self) -> dict[str, Any]:
        groups = self.cloud.client("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=[self.deployment.group])["AutoScalingGroups"]
        return groups[0]

    def stack_exists(self) -> bool:
        stacks = self.cloud.client("cloudformation").list_stacks()["StackSummaries"]
        return any(s["StackName"] == self.deployment.stack and s["StackStatus"] != "DELETE_COMPLETE"
                   for s in stacks)


@pytest.fixture(scope="session")
def local_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    with LocalCloud(tmp_path_factory.mktemp("localcloud"), log=print) as cloud:
        yield cloud


@pytest.fixture(scope="session")
def example_app(local_cloud: LocalCloud) -> Path:
    return local_cloud.synth(JOB)


def play(cloud: LocalCloud, app: Path, plan: InterruptionPlan, parameters: dict[str, str],
         total_steps: int | None = TOTAL_STEPS, command_env: dict[str, str] | None = None,
         outages: list[SpotOutage] | None = None, price_trace: Path | None = None, timeout_seconds: float = 420,
         on_tick: Callable[[Player], None] | None = None, **options: Any) -> Iterator[Scenario]:
    """Deploy, run to the end, hand the scenario to the tests, destroy the stack if a test did not.
    `on_tick`: called with the player each tick; `options`: more of the player's RunOptions (an image to play,
    a hook that says when an instance may be interrupted)."""
    deployment = cloud.deploy(app, parameters)
    scenario = None
    try:
        # The commands take the tests' torch threads (tests/conftest.py), as a reference run in a test does.
        threads = {"OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"]}
        run_options = RunOptions(plan=plan, total_steps=total_steps, timeout_seconds=timeout_seconds,
                                 command_env={**threads, **(command_env or {})}, outages=outages or [],
                                 price_trace=price_trace, **options)
        player = Player(cloud, deployment, run_options, on_tick=on_tick)
        scenario = Scenario(cloud, deployment, player.run())
        print("\n".join(summary_lines(cloud.iam_decisions, cloud.client("iam"), deployment.stack)))
        yield scenario
    finally:
        if scenario is None or scenario.stack_exists():
            cloud.destroy(deployment)


def job_of_its_own(tmp_path_factory: pytest.TempPathFactory, name: str, like: str) -> str:
    """jobs/<like>.toml as a job named `name`: each region's bucket is named after its job, and a destroyed stack
    keeps its bucket, so a scenario of a job of several regions that another scenario of this local cloud may have
    run already needs a name of its own."""
    job = tmp_path_factory.mktemp(name) / f"{name}.toml"
    job.write_text((JOBS_DIR / f"{like}.toml").read_text())
    return str(job)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A scenario's run is bounded by the player (RunOptions.timeout_seconds, 420 s) and a deploy and a
    destroy; the suite's 300 s per test would cut a loaded machine's run short first."""
    for item in items:
        if item.path.parent == Path(__file__).parent and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(540))


def play_script(cloud: LocalCloud, folder: Path, file: str, arguments: str, plan: InterruptionPlan,
                env: dict[str, str]) -> Iterator[Scenario]:
    """`play` for a script as people write it (tests/fixtures/plain_scripts), unmodified, as a job of its own;
    it keeps where it is in WHERE, which the tests read and the agent never does."""
    app = cloud.synth(str(plain_job(folder, file, arguments)))
    yield from play(cloud, app, plan, {}, total_steps=None,
                    command_env={**env, "WHERE_FILE": WHERE, "OMP_NUM_THREADS": "1"})
