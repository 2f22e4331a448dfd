"""Unmodified Hugging Face Trainer and Lightning scripts (jobs/hf, jobs/lightning) under the agent:
their own checkpoints reach S3, and after a power-off the replacement resumes from the newest one
the way the framework's own examples resume, with no change to the script."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import REPO_ROOT, AgentProcess, agent_env

STEPS, SAVE_EVERY = 600, 100
FRAMEWORKS = {
    "hf": (f"{sys.executable} {REPO_ROOT / 'jobs/hf/train.py'}", "HF", r"resuming from .*/checkpoint-(\d+)$"),
    "lightning": (f"{sys.executable} {REPO_ROOT / 'jobs/lightning/train.py'}", "PL",
                  r"Restoring states from the checkpoint path at .*/last\.ckpt"),
}


def framework_env(aws_env: dict[str, str], bucket: str, job: str, directory: Path, imds: FakeImds,
                  instance: str, command: str, prefix: str) -> dict[str, str]:
    env = agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=directory, imds_url=imds.url,
                    instance_id=instance, command=command)
    env.update({f"{prefix}_STEPS": str(STEPS), f"{prefix}_SAVE_STEPS": str(SAVE_EVERY), "OMP_NUM_THREADS": "1",
                f"{prefix}_CALLBACK": "off"})  # unmodified unless a test turns the one-line callback on
    return env


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_unmodified_script_resumes_from_its_own_checkpoint_after_a_power_off(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, framework: str
) -> None:
    command, prefix, resumed_line = FRAMEWORKS[framework]
    job = f"fw-{framework}"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    with FakeImds(instance_id="i-first") as imds:
        first = AgentProcess(framework_env(aws_env, bucket, job, tmp_path / "a", imds, "i-first", command,
                                           prefix)).start()
        try:
            first.wait_for(lambda: (store.latest_step() or 0) >= SAVE_EVERY, timeout=240,
                           what="the first framework checkpoint in S3")
            first.kill_tree()  # power off: no notice, no emergency checkpoint
        finally:
            first.stop()
    in_s3 = store.latest_step()
    assert in_s3 is not None and in_s3 % SAVE_EVERY == 0 and in_s3 < STEPS, first.text()

    with FakeImds(instance_id="i-second") as imds:
        second = AgentProcess(framework_env(aws_env, bucket, job, tmp_path / "b", imds, "i-second", command,
                                            prefix)).start()
        try:
            assert second.wait(timeout=300) == 0, second.text()
        finally:
            second.stop()
    resumed = [m for line in second.lines if (m := re.search(resumed_line, line))]
    assert resumed, f"the script did not resume from a restored checkpoint:\n{second.text()}"
    if framework == "hf":
        assert int(resumed[0].group(1)) == in_s3
    assert f"finished at global step {STEPS}" in second.lines, second.text()
    assert store.latest_step() == STEPS
    status = store.get_json("status.json")
    assert (status["state"], status["checkpoint_step"], status["warning"]) == ("DONE", STEPS, "")


def test_a_script_saving_under_an_unknown_name_is_warned_about(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    command = 'for i in 1 2 3; do echo w > "$CHECKPOINT_DIR/weights_latest.bin"; sleep 0.2; done'
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "silent")
    with FakeImds(instance_id="i-silent") as imds:
        agent = AgentProcess(agent_env(aws_env, bucket=bucket, job="silent", checkpoint_dir=tmp_path / "c",
                                       imds_url=imds.url, instance_id="i-silent", command=command)).start()
        try:
            assert agent.wait(timeout=120) == 0, agent.text()
        finally:
            agent.stop()
    warning = store.get_json("status.json")["warning"]
    assert "no recognised checkpoint" in warning and "weights_latest.bin (1 entries)" in warning, warning
    assert any("WARNING: no recognised checkpoint" in line for line in agent.lines)
    assert any(event["kind"] == "warning" for event in store.events())


NOTICE_AT = 230  # between two saves (200 and 300)


# auto: an unmodified script, given the callback by the agent; off: unmodified, with SPOT_AUTO_RESUME=off.
# A script that adds the callback itself keeps only its own: tests/e2e/test_own_code.py (one emergency save).
@pytest.mark.parametrize("callback", ["auto", "off"])
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_notice_costs_no_step_with_the_callback_and_at_most_one_save_interval_without(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, framework: str, callback: str
) -> None:
    command, prefix, _ = FRAMEWORKS[framework]
    job = f"notice-{framework}-{callback}"
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)
    with FakeImds(instance_id="i-noticed") as imds:
        env = framework_env(aws_env, bucket, job, tmp_path / "a", imds, "i-noticed", command, prefix)
        if callback == "off":
            env["SPOT_AUTO_RESUME"] = "off"
        env[f"{prefix}_STEPS"] = str(100 * STEPS)  # still training when the notice comes, however slow the machine
        env["PL_PROGRESS_BAR"] = "on"  # Lightning's bar writes to stdout, with no newline before the callback's events
        agent = AgentProcess(env).start()
        try:
            if callback != "off":  # the callback prints every step
                agent.wait_for(lambda: max(steps(agent), default=0) >= NOTICE_AT, timeout=240,
                               what=f"step {NOTICE_AT}")
            else:  # an unmodified script prints no steps: its saves are all there is to go by
                agent.wait_for(lambda: (store.latest_step() or 0) >= 2 * SAVE_EVERY, timeout=240,
                               what="the second save in S3")
            imds.announce_interruption(in_seconds=120)
            assert agent.wait(timeout=120) == 0, agent.text()
        finally:
            agent.stop()
    assert store.get_json("status.json")["state"] == "INTERRUPTED", agent.text()
    in_s3 = store.latest_step()
    if callback != "off":
        # Zero completed steps lost: the step in flight at the notice finished and was saved.
        emergency = agent.events("emergency_checkpoint")
        assert emergency and in_s3 == emergency[0]["step"] >= max(steps(agent)) >= NOTICE_AT, agent.text()
        assert [line for line in agent.lines if "spot-trainer: added Spot" in line], agent.text()
    else:
        assert not agent.events("emergency_checkpoint")
        assert in_s3 is not None and in_s3 % SAVE_EVERY == 0 and in_s3 >= 2 * SAVE_EVERY, agent.text()


def steps(agent: AgentProcess) -> list[int]:
    return [event["step"] for event in agent.events("step")]
