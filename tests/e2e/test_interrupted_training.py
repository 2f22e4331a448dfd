"""The example job deployed with the real CDK CLI to moto and trained on local spot instances that
are taken away four times: a power-off without notice, a capacity rebalance (the replacement boots
beside the old instance), and two plain notices. One run; each test checks one promise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from localcloud.cloud import LocalCloud
from localcloud.interruptions import ANNOUNCED, HARD, InterruptionPlan
from localcloud.report import build_report
from spot_trainer.storage.files.local import latest_checkpoint, load_model_weights
from spot_trainer.storage.steps.remote import RemoteStore
from tests.e2e.conftest import CHECKPOINT_EVERY, JOB, PACE, TOTAL_STEPS, TRAIN_ARGS, Scenario, play

PLAN = InterruptionPlan(count=3, hard_kills=1, notice_seconds=6, early_replacement=1)


@pytest.fixture(scope="module")
def run(local_cloud: LocalCloud, example_app: Path) -> Iterator[Scenario]:
    yield from play(local_cloud, example_app, PLAN, {"TrainArguments": TRAIN_ARGS})


def test_job_finishes_and_leaves_nothing_running(run: Scenario) -> None:
    status = run.s3_json("status.json")
    assert status["state"] == "DONE", status
    assert status["step"] == TOTAL_STEPS and run.s3_json("latest.json")["step"] == TOTAL_STEPS
    assert status["interruptions"] == 3  # the notices agents saw; a power-off without notice leaves none
    assert len(run.player.interruptions) == 4
    group = run.group()
    assert group["DesiredCapacity"] == 0 and group["Instances"] == []
    assert len(run.player.instances) == 5  # the first one and four replacements
    running = run.cloud.client("ec2").describe_instances(
        InstanceIds=list(run.player.instances), Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    assert running["Reservations"] == []
    assert all(instance.processes() == [] for instance in run.player.instances.values())


def test_the_last_instance_completes_the_stacks_drain_hook(run: Scenario) -> None:
    journals = [instance.journal.read_text() for instance in run.player.instances.values()]
    (finisher,) = [text for text in journals if "training finished" in text]
    assert "spot-trainer: completed lifecycle action spot-trainer-drain" in finisher


def test_final_weights_equal_an_uninterrupted_run(run: Scenario, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    env = {**os.environ, "CHECKPOINT_DIR": str(reference), "RESUME_FROM": ""}
    unpaced = TRAIN_ARGS.replace(PACE, "").split()  # pacing only sleeps; the numbers are the same
    done = subprocess.run([sys.executable, "-m", "spot_trainer", "train", *unpaced], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    store = RemoteStore(run.cloud.client("s3"), run.deployment.bucket, JOB)
    restored = store.restore(tmp_path / "from-s3")
    assert restored is not None and restored.name.endswith(f"{TOTAL_STEPS:08d}")
    expected = load_model_weights(latest_checkpoint(reference))  # type: ignore[arg-type]
    actual = load_model_weights(restored)
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[name], actual[name]) for name in expected)


def test_announced_interruptions_lose_no_completed_step(run: Scenario) -> None:
    announced = [r for r in run.player.interruptions if r.kind == ANNOUNCED]
    assert len(announced) == 3
    for record in announced:
        assert record.reached_step is not None and record.reached_step > 0
        assert record.resumed_step == record.reached_step, record
        assert run.player.logs[record.instance].emergency_step == record.reached_step


def test_hard_kill_resumes_from_last_uploaded_checkpoint(run: Scenario) -> None:
    [record] = [r for r in run.player.interruptions if r.kind == HARD]
    assert record.uploaded_step is not None and record.uploaded_step % CHECKPOINT_EVERY == 0
    assert record.resumed_step == record.uploaded_step  # nothing newer existed, nothing older was used
    assert run.player.logs[record.instance].emergency_step is None  # no notice, no emergency save
    assert record.lost_steps is not None and 0 <= record.lost_steps <= CHECKPOINT_EVERY


def test_overlapping_instances_have_one_writer(run: Scenario) -> None:
    assert run.player.most_alive >= 2
    assert any(log.waited_for_lease for log in run.player.logs.values())
    history = run.player.latest_history
    assert history == sorted(set(history)) and history[-1] == TOTAL_STEPS  # latest.json never went back
    published = [e for e in run.events() if e["kind"] == "checkpoint" and e.get("published")]
    writers = [e["instance"] for e in published]
    # Each instance wrote in one stretch: no checkpoint of one between two of another.
    stretches = [w for i, w in enumerate(writers) if i == 0 or writers[i - 1] != w]
    assert len(stretches) == len(set(stretches)), writers
    steps = [e["step"] for e in published]
    assert steps == sorted(set(steps))


def test_report_accounts_for_every_interruption_and_instance_second(run: Scenario) -> None:
    report = build_report(run.player, run.s3_json("status.json"), discount=0.7)
    [hard] = [r for r in run.player.interruptions if r.kind == HARD]
    assert (report.state, report.steps, report.interruptions, report.hard_kills) == ("DONE", TOTAL_STEPS, 4, 1)
    assert report.completed_steps_lost == hard.lost_steps  # notices lose nothing; the power-off its tail
    assert report.steps_computed == TOTAL_STEPS + report.completed_steps_lost
    assert report.instances == 5 and 0 < report.on_demand_equivalent_seconds < report.instance_seconds
    assert report.spot_cost_usd == pytest.approx(report.instance_seconds / 3600 * 0.3 * report.on_demand_usd_per_hour,
                                                 rel=1e-3)
    assert json.loads(report.to_json())["events"][0]["kind"] == HARD


def test_destroy_removes_stack_and_keeps_checkpoints(run: Scenario) -> None:
    run.cloud.destroy(run.deployment)
    assert not run.stack_exists()
    s3 = run.cloud.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=run.deployment.bucket, Prefix=f"{JOB}/")["Contents"]]
    assert f"{JOB}/latest.json" in keys
    assert any(key.startswith(f"{JOB}/checkpoints/step-{TOTAL_STEPS:08d}/") for key in keys)
