"""Uploads against a disk and names that fight back, with the real agent: a checkpoint folder with no
inode left for the staging view, file names that are not UTF-8 in every checkpoint, and files S3 can
never take. Nothing the command saved is lost for them, and whatever keeps failing is said where the
user looks: status.json, the events, `status` and one notification per cause."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3
import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.node.endings import EXIT_FAILED
from spot_trainer.storage.steps.remote import RemoteStore
from tests.integration.agent_runner import AgentProcess, agent_env
from tests.integration.remote_helpers import names_and_bytes
from tests.integration.test_agent_failures import run_status_cli
from tests.integration.test_agent_notifications import inbox, received  # noqa: F401  (inbox: a fixture)
from tests.support.fault_commands import FULL_DISK, NOTHING_STORABLE, ODD_NAMES, UNTIL_STOPPED
from tests.support.tiny_fs import tiny_tmpfs


def store_for(aws_env: dict[str, str], bucket: str, job: str) -> RemoteStore:
    return RemoteStore(boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"]), bucket, job)


def start(aws_env: dict[str, str], bucket: str, job: str, folder: Path, imds: FakeImds, command: str,
          **settings: str) -> AgentProcess:
    return AgentProcess(agent_env(aws_env, bucket=bucket, job=job, checkpoint_dir=folder, imds_url=imds.url,
                                  instance_id=imds.instance_id, command=command, **settings)).start()


@pytest.mark.parametrize("ending", ["a notice", "the job's end"])
def test_with_no_inode_left_for_staging_the_last_checkpoint_still_reaches_s3_and_restores(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, ending: str, inbox: tuple[str, Any, str]  # noqa: F811
) -> None:
    topic, sqs, queue = inbox
    job = f"full-{bucket[-8:]}"
    notice = ending == "a notice"
    with tiny_tmpfs(tmp_path / "disk", inodes=64) as disk, FakeImds(instance_id="i-full") as imds:
        running = start(aws_env, bucket, job, disk, imds, FULL_DISK.format(wait=UNTIL_STOPPED if notice else ""),
                        notify_topic=topic)
        try:
            if notice:  # step-10 failed to stage while the command ran: said, then the notice
                running.wait_for(lambda: any("step 10 failed: staging step-10" in line for line in running.lines),
                                 what="step 10's staging failure")
                imds.announce_interruption(in_seconds=120)
            assert running.wait(timeout=90) == 0, running.text()
        finally:
            running.stop()
        store = store_for(aws_env, bucket, job)
        assert store.latest_step() == 11, running.text()
        assert any("so step-11 is uploaded from its own files" in line for line in running.lines), running.text()
        status = store.get_json("status.json") or {}
        assert status["state"] == ("INTERRUPTED" if notice else "DONE") and status["checkpoint_step"] == 11
        if notice:
            assert any("checkpoint step 11 is safe in S3" in line for line in running.lines), running.text()
            failing = store.events("upload_failing")
            assert len(failing) == 1 and "no space left on device (ENOSPC)" in failing[0]["cause"], failing
            assert [m["Subject"] for m in received(sqs, queue)].count(f"Spot Trainer {job}: checkpoints not "
                                                                     "reaching S3") == 1
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and restored.name == "step-11" and restored.read_bytes() == b"weights-11"


def test_names_that_are_not_utf8_in_every_checkpoint_are_published_and_restored_as_they_were(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    job = f"odd-{bucket[-8:]}"
    with FakeImds(instance_id="i-odd") as imds:
        first = start(aws_env, bucket, job, tmp_path / "first", imds, ODD_NAMES)
        assert first.wait(timeout=90) == 0, first.text()
    store = store_for(aws_env, bucket, job)
    assert store.latest_step() == 30 and (store.get_json("status.json") or {})["warning"] == ""
    uploads = store.events("checkpoint")
    assert uploads and all(event["published"] for event in uploads), uploads
    assert not any("failed" in line for line in first.lines), first.text()
    with FakeImds(instance_id="i-odd-2") as imds:  # a replacement restores it: the very same names
        second = start(aws_env, bucket, job, tmp_path / "second", imds, 'ls "$RESUME_FROM"; exit 0')
        assert second.wait(timeout=90) == 0, second.text()
    wanted = names_and_bytes(tmp_path / "first" / "step-30")
    assert set(wanted) == {b"model.pt", b"w\xff.bin", b"sub\xfe/100%\xe9.txt"}
    assert names_and_bytes(tmp_path / "second" / "step-30") == wanted


def test_uploads_that_keep_failing_are_said_in_status_the_events_and_once_on_the_topic(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, inbox: tuple[str, Any, str]  # noqa: F811
) -> None:
    topic, sqs, queue = inbox
    job = f"unstorable-{bucket[-8:]}"
    with FakeImds(instance_id="i-unstorable") as imds:
        running = start(aws_env, bucket, job, tmp_path / "c", imds, NOTHING_STORABLE, notify_topic=topic,
                        grace_seconds="2")
        try:
            assert running.wait(timeout=90) == EXIT_FAILED, running.text()
        finally:
            running.stop()
    store = store_for(aws_env, bucket, job)
    status = store.get_json("status.json") or {}
    cause = "file names S3 cannot take"
    assert status["state"] == "FAILED" and status["warning"].startswith(f"checkpoint uploads are failing: {cause}")
    assert [event["cause"] for event in store.events("upload_failing")] == [cause]
    subjects = [message["Subject"] for message in received(sqs, queue)]
    assert subjects.count(f"Spot Trainer {job}: checkpoints not reaching S3") == 1, subjects
    shown = run_status_cli({**os.environ, **aws_env}, "--job", job, "--bucket", bucket)
    assert f"warning        checkpoint uploads are failing: {cause}" in shown.stdout, shown.stdout + shown.stderr
    assert any("S3 can take none of its files" in line for line in running.lines), running.text()
    assert store.latest_step() is None
