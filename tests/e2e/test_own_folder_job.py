"""A user's first try with a script they already have: tests/fixtures/hf_own_folder/train.py saves into
its own fixed "outputs" folder, calls trainer.train() with no resume logic and knows nothing of Spot
Trainer. The job file names that folder
(`checkpoint_dir = "outputs"`) and ships the code, with a checkpoint a local run left in outputs/. Deployed
with the real CDK CLI to moto and played on local spot instances (one power-off, one notice), the job
ends DONE at its last step, every replacement resumes from what the job saved, never from the local
leftover, and the final model is kept in S3. Each instance runs the job's setup step (its requirements) first."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.interruptions import ANNOUNCED, HARD, InterruptionPlan
from localcloud.report import build_report
from tests.e2e.conftest import Scenario, play

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures/hf_own_folder"
# The script saves every 50 steps. Its two interruptions come 5 s into each of the first two instances' training:
# about 1,000 steps in all at 100 steps/s (2 shared cores), 2,000 on a fast core (190 steps/s, see
# tests/e2e/test_own_code.py). 4,000 steps leave them room there, and the last instance the rest to end DONE.
STEPS, SAVE_EVERY, LEFTOVER = 4000, 50, 9999
PLAN = InterruptionPlan(count=1, hard_kills=1, notice_seconds=6, spacing_seconds=5)  # power-off, then notice
JOB = f"""\
description = "An HF script with its own output folder, unchanged"
[run]
command = "python train.py {STEPS}"
workdir = "code"
setup = "pip install --quiet -r requirements.txt"
checkpoint_dir = "outputs"
grace_seconds = 60
[capacity]
instance_types = ["c7i.xlarge"]
"""


@pytest.fixture(scope="module")
def scenario(local_cloud: LocalCloud, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    folder = tmp_path_factory.mktemp("own-folder-job")
    shutil.copytree(SCRIPT, folder / "code", ignore=shutil.ignore_patterns("__pycache__"))
    leftover = folder / f"code/outputs/checkpoint-{LEFTOVER}"
    leftover.mkdir(parents=True)
    (leftover / "trainer_state.json").write_text(f'{{"global_step": {LEFTOVER}}}')
    (folder / "own.toml").write_text(JOB)
    app = local_cloud.synth(str(folder / "own.toml"))
    yield from play(local_cloud, app, PLAN, {}, total_steps=None, command_env={"OMP_NUM_THREADS": "1"})


def test_it_survives_a_power_off_and_a_notice_and_ends_done_at_its_last_step(scenario: Scenario) -> None:
    status = scenario.s3_json("status.json")
    assert (status["state"], status["checkpoint_step"], status["warning"]) == ("DONE", STEPS, ""), status
    assert [r.kind for r in scenario.player.interruptions] == [HARD, ANNOUNCED]


def test_each_instance_unpacked_the_shipped_code_and_ran_the_setup_step(scenario: Scenario) -> None:
    for instance in scenario.player.instances.values():
        log = (instance.root / "var/log/spot-trainer/bootstrap.log").read_text()
        assert "[job-code]: job code from s3://cdk-" in log and "[setup-command]: COMPLETED" in log, log[-1500:]


def test_each_replacement_resumes_the_jobs_own_save_never_the_local_leftover(scenario: Scenario) -> None:
    journals = [i.journal.read_text() for i in scenario.player.instances.values()]
    # The script has no resume logic: the runtime installed from the job's wheel gives train() the checkpoint.
    resumed = [int(step) for text in journals
               for step in re.findall(r"named no checkpoint: resuming from \S+/outputs/checkpoint-(\d+),", text)]
    # After the power-off, a regular save; after the notice, the step in flight, which the callback the
    # agent gives the unmodified Trainer saved.
    assert len(resumed) == 2 and resumed[0] % SAVE_EVERY == 0 and all(step < STEPS for step in resumed), resumed
    began = [int(step) for text in journals for step in re.findall(r"training from global step (\d+)", text)]
    assert began == [0, *resumed], began  # the first instance found no checkpoint-9999 shipped to it


def test_the_final_model_is_kept_and_the_report_says_where(scenario: Scenario) -> None:
    s3, bucket, job = scenario.cloud.client("s3"), scenario.deployment.bucket, scenario.deployment.job
    kept = {item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix=f"{job}/final/").get("Contents", [])}
    assert f"{job}/final/model.safetensors" in kept, kept
    report = build_report(scenario.player, scenario.s3_json("status.json"))
    assert f"kept in s3://{bucket}/{job}/final/" in report.final_outputs
