"""What the agent meets at run time beyond the happy path: processes the command leaves behind, a
status record that does not parse, a final checkpoint that cannot reach S3. Each ends in bounded time
with a line that names it."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.node.endings import EXIT_FAILED
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env
from tests.integration.fleet import create_group, desired_capacity


def agent(aws_env: dict[str, str], bucket: str, job: str, tmp_path: Path, command: str,
          **settings: str) -> AgentProcess:
    imds = FakeImds(instance_id=f"i-{job}").start()
    process = AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=tmp_path / "c", imds_url=imds.url,
                                     instance_id=f"i-{job}", command=command, **settings)).start()
    process.imds = imds  # type: ignore[attr-defined]
    return process


def failed_for_good(running: AgentProcess, timeout: float) -> None:
    """The agent ends the job FAILED within `timeout`; it and its metadata service are stopped either way."""
    try:
        assert running.wait(timeout=timeout) == EXIT_FAILED, running.text()
    finally:
        running.stop()
        running.imds.stop()  # type: ignore[attr-defined]


def test_processes_the_command_left_behind_are_stopped_and_the_job_ends(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    running = agent(aws_env, bucket, "leftover", tmp_path, "sleep 600 & echo started; exit 0", grace_seconds="3")
    try:
        running.run_to_the_end(timeout=60)
    finally:
        running.imds.stop()  # type: ignore[attr-defined]
    assert any("the command exited with code 0 3s ago, but processes it started still run" in line
               for line in running.lines), running.text()
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "leftover")
    assert store.get_json("status.json")["state"] == "DONE"


def test_a_status_record_that_does_not_parse_is_named_and_the_job_runs(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    s3 = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"])
    s3.put_object(Bucket=bucket, Key="damaged-status/status.json", Body=b"<html>502 Bad Gateway</html>")
    running = agent(aws_env, bucket, "damaged-status", tmp_path, "echo trained; exit 0")
    try:
        running.run_to_the_end(timeout=60)
    finally:
        running.imds.stop()  # type: ignore[attr-defined]
    assert any("damaged-status/status.json: not valid JSON" in line and "taken as absent" in line
               for line in running.lines), running.text()
    assert RemoteStore(s3, bucket, "damaged-status").get_json("status.json")["state"] == "DONE"


def test_a_final_checkpoint_that_cannot_reach_s3_fails_the_job_and_keeps_the_instance(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """The newest checkpoint is only on this disk: not DONE, and the hook is left to time out so that
    it can still be copied off, rather than the instance let go at once."""
    group = f"fleet-{bucket[-8:]}"
    autoscaling = create_group(aws_env, group, drain_hook="drain-hook")
    # Its only file's S3 key would be over 1024 bytes: no escape makes it fit.
    unsendable = ('long=$(printf "%0250d" 0); d="$CHECKPOINT_DIR/ckpt_5/$long/$long/$long/$long"; '
                  'mkdir -p "$d" && echo w > "$d/model.pt"; exit 0')
    running = agent(aws_env, bucket, "unsent", tmp_path, unsendable, grace_seconds="2",
                    lifecycle_hook="drain-hook", asg_name=group)
    try:
        running.wait_for(lambda: any("giving up" in line for line in running.lines), what="giving up")
        running.imds.set_target_lifecycle_state("Terminated")  # type: ignore[attr-defined]  # the group picks it
        assert running.wait(timeout=60) == EXIT_FAILED, running.text()
    finally:
        running.stop()
        running.imds.stop()  # type: ignore[attr-defined]
    status = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "unsent") \
        .get_json("status.json")
    assert status["state"] == "FAILED" and "the final checkpoint (step 5) did not reach S3" in status["reason"]
    assert desired_capacity(autoscaling, group) == 0
    assert not any("completed lifecycle action" in line for line in running.lines), running.text()
    assert any("this instance is kept until its lifecycle hook drain-hook times out" in line
               for line in running.lines), running.text()


def test_a_final_checkpoint_that_is_a_link_ends_the_wait_at_once_in_one_line(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """No retry can upload a link: it is said once, and the job gives up at once rather than for the whole
    grace period, every 5 s."""
    linked = ('mkdir -p "$CHECKPOINT_DIR/../elsewhere" && echo w > "$CHECKPOINT_DIR/../elsewhere/model.pt" && '
              'ln -s ../elsewhere "$CHECKPOINT_DIR/step-5"; exit 0')
    running = agent(aws_env, bucket, "linked", tmp_path, linked, grace_seconds="60")
    failed_for_good(running, timeout=45)
    started = running.first_time(lambda line: "starting 'mkdir" in line)
    gave_up = running.first_time(lambda line: "giving up" in line)
    assert started is not None and gave_up is not None and gave_up - started < 10, running.text()
    assert not any("retrying" in line for line in running.lines), running.text()
    assert len([line for line in running.lines if "links are never" in line and "giving up" not in line]) == 1, \
        running.text()
    status = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "linked") \
        .get_json("status.json")
    assert status["state"] == "FAILED", status
    assert status["reason"] == ("the final checkpoint (step 5) did not reach S3: it is only on this instance's disk, "
                                "and no retry can send it: step-5 is a link, and links are never uploaded"), status


DAMAGES_ITS_STEP = """
import json, os, sys, time
import boto3
bucket, job = sys.argv[1], sys.argv[2]
step = os.path.join(os.environ["CHECKPOINT_DIR"], "step-5")
os.makedirs(step + ".tmp")
with open(os.path.join(step + ".tmp", "model.pt"), "wb") as stream:
    stream.write(os.urandom(1000))
os.rename(step + ".tmp", step)
s3 = boto3.client("s3")
while True:  # published, then its object replaced in S3 by other bytes of the same size
    try:
        if json.load(s3.get_object(Bucket=bucket, Key=job + "/latest.json")["Body"])["step"] == 5:
            break
    except s3.exceptions.NoSuchKey:
        pass
    time.sleep(0.1)
s3.put_object(Bucket=bucket, Key=job + "/checkpoints/step-00000005/model.pt", Body=os.urandom(1000),
              ChecksumAlgorithm="SHA256")
"""


def test_a_final_step_that_would_not_restore_whole_from_s3_is_not_done(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """The final checkpoint went up whole, then S3's copy changed: the job says why, is not DONE, and keeps
    the disk's copy, without waiting out the grace period."""
    script = tmp_path / "damages_its_step.py"
    script.write_text(DAMAGES_ITS_STEP)
    running = agent(aws_env, bucket, "damaged-final", tmp_path, f"{sys.executable} {script} {bucket} damaged-final",
                    grace_seconds="60")
    failed_for_good(running, timeout=45)
    status = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "damaged-final") \
        .get_json("status.json")
    assert status["state"] == "FAILED", status
    assert status["reason"] == ("the final checkpoint in S3 (step 5) would not restore whole (model.pt: S3 holds "
                                "other bytes than its manifest describes (its SHA-256 differs)); step 5 is kept on "
                                "this instance's disk"), status
    assert (tmp_path / "c" / "step-5" / "model.pt").is_file()
    assert not any("training finished" in line or "retrying" in line for line in running.lines), running.text()


HANGS_AT = Path(__file__).resolve().parents[1] / "fixtures/hangs_at.py"


def test_a_command_that_hangs_is_started_again_once_then_the_job_fails_naming_the_step(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """Stall limit 3 s: the first hang at step 20 is stopped and started again from step 20; the second
    hang at the same step ends the job FAILED with the reason, and the group at zero."""
    autoscaling = create_group(aws_env, "hangs")
    running = agent(aws_env, bucket, "hangs", tmp_path, f"{sys.executable} {HANGS_AT} 20 100",
                    stall_minutes="0.05", restart_on_stall="true", asg_name="hangs", grace_seconds="3")
    failed_for_good(running, timeout=90)
    text = running.text()
    hangs = [line for line in running.lines if "no progress for" in line and "stopping the command" in line]
    assert len(hangs) == 2 and all("at step 20 (no step line, no new checkpoint)" in line for line in hangs), text
    assert "starting the command again from the newest checkpoint" in text, text
    store = RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, "hangs")
    status = store.get_json("status.json")
    assert status["state"] == "FAILED" and "hung twice at step 20" in status["reason"], status
    assert desired_capacity(autoscaling, "hangs") == 0
