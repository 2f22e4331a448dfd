"""Background uploads: never two at once, intermediates skipped, failures survived."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from spot_trainer.storage.failure_causes import FailureCause
from spot_trainer.storage.steps.remote import RemoteStoreError
from spot_trainer.storage.steps.upload_health import UPLOADS_FAILING, UploadWarning
from spot_trainer.storage.steps.uploader import CheckpointUploader, Uploaded
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.support.senders import SendsBy, step_folder
from tests.support.tiny_fs import fill_inodes, remount_read_only, tiny_tmpfs


def make_checkpoint(root: Path, step: int) -> Path:
    path = root / f"step-{step}"
    path.mkdir()
    (path / "state.pt").write_bytes(b"x" * (100 + step))
    return path


def test_checkpoints_written_during_an_upload_collapse_into_the_newest(tmp_path: Path) -> None:
    gate, uploading = threading.Event(), threading.Event()
    uploaded: list[int] = []
    results: list[Uploaded] = []

    def slow_upload(path: Path, step: int) -> UploadOutcome:
        uploading.set()
        gate.wait(10)
        uploaded.append(step)
        return UploadOutcome.PUBLISHED

    uploader = CheckpointUploader(SendsBy(slow_upload), results.append, log=lambda line: None)
    assert uploader.offer(step_folder(1, make_checkpoint(tmp_path, 1)))
    assert uploading.wait(10)
    for step in (2, 3, 4):
        assert uploader.offer(step_folder(step, make_checkpoint(tmp_path, step)))
    assert not uploader.offer(step_folder(3, tmp_path / "step-3")), "an older step is never queued again"
    gate.set()
    assert uploader.drain(timeout=10)
    uploader.close()
    assert uploaded == [1, 4]
    assert [(r.step, r.bytes, r.published) for r in results] == [(1, 101, True), (4, 104, True)]
    assert uploader.uploaded_step == 4


def test_a_failed_upload_is_reported_and_the_next_one_still_goes(tmp_path: Path) -> None:
    messages: list[str] = []
    published: list[int] = []

    def flaky(path: Path, step: int) -> UploadOutcome:
        if step == 1:
            raise OSError(f"{path}: vanished (pruned meanwhile)")
        published.append(step)
        return UploadOutcome.of(step != 3)  # latest.json already newer: uploaded but not published

    uploader = CheckpointUploader(SendsBy(flaky), lambda done: None, uploaded_step=0, log=messages.append)
    for step in (1, 2, 3):
        uploader.offer(step_folder(step, make_checkpoint(tmp_path, step)))
        assert uploader.drain(timeout=10)
    uploader.close()
    assert published == [2, 3] and uploader.uploaded_step == 2
    assert len(messages) == 1
    assert "upload of checkpoint step 1 failed" in messages[0] and "vanished" in messages[0]


def test_a_broken_callback_does_not_stop_later_uploads(tmp_path: Path) -> None:
    done: list[int] = []

    def callback(result: Uploaded) -> None:
        if result.step == 1:
            raise RuntimeError("events bucket unreachable")
        done.append(result.step)

    uploader = CheckpointUploader(SendsBy(lambda path, step: UploadOutcome.PUBLISHED), callback, log=lambda line: None)
    for step in (1, 2):
        uploader.offer(step_folder(step, make_checkpoint(tmp_path, step)))
        assert uploader.drain(timeout=10)
    uploader.close()
    assert done == [2] and uploader.uploaded_step == 2


def test_a_checkpoint_pruned_before_its_turn_is_skipped_quietly_and_the_next_one_goes(tmp_path: Path) -> None:
    uploaded: list[int] = []
    lines: list[str] = []
    uploader = CheckpointUploader(SendsBy(lambda path, step: uploaded.append(step) or UploadOutcome.PUBLISHED),
                                  lambda result: None, log=lines.append)
    gone = make_checkpoint(tmp_path, 5)
    for item in gone.iterdir():
        item.unlink()
    gone.rmdir()  # the trainer's rotation got there first
    assert uploader.offer(step_folder(5, gone))
    assert uploader.drain(timeout=10)
    assert uploader.offer(step_folder(6, make_checkpoint(tmp_path, 6)))
    assert uploader.drain(timeout=10)
    uploader.close()
    assert uploaded == [6] and lines == [] and uploader.uploaded_step == 6


def test_a_staging_error_fails_that_step_and_the_next_uploads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk or a name too long while linking the upload view: the worker lives on, drain() ends."""
    from spot_trainer.storage.steps import uploader as uploader_module

    real_stage = uploader_module.stage
    refused = {1}

    def stage(path: Path) -> Path | None:
        if int(path.name.split("-")[1]) in refused:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_stage(path)

    monkeypatch.setattr(uploader_module, "stage", stage)
    lines: list[str] = []
    uploaded: list[int] = []
    uploader = CheckpointUploader(SendsBy(lambda path, step: uploaded.append(step) or UploadOutcome.PUBLISHED),
                                  lambda done: None, log=lines.append)
    uploader.offer(step_folder(1, make_checkpoint(tmp_path, 1)))
    assert uploader.drain(timeout=10)
    uploader.offer(step_folder(2, make_checkpoint(tmp_path, 2)))
    assert uploader.drain(timeout=10), "the worker died with the first step"
    uploader.close()
    assert uploaded == [2]
    assert any("step 1 failed" in line and "No space left on device" in line for line in lines), lines


def test_links_in_a_checkpoint_are_named_and_never_uploaded(tmp_path: Path) -> None:
    secret = tmp_path / "credentials"
    secret.write_text("aws_secret_access_key = x")
    checkpoint = make_checkpoint(tmp_path, 3)
    (checkpoint / "creds").symlink_to(secret)
    (checkpoint / "home").symlink_to(tmp_path, target_is_directory=True)
    sent: list[set[str]] = []
    lines: list[str] = []

    def upload(path: Path, step: int) -> UploadOutcome:
        sent.append({p.relative_to(path).as_posix() for p in path.rglob("*")})
        return UploadOutcome.PUBLISHED

    uploader = CheckpointUploader(SendsBy(upload), lambda done: None, log=lines.append)
    uploader.offer(step_folder(3, checkpoint))
    assert uploader.drain(timeout=10)
    uploader.close()
    assert sent == [{"state.pt"}]
    assert any("creds, home" in line and "links are never followed" in line for line in lines), lines


def test_a_checkpoint_that_is_a_link_to_a_folder_is_not_uploaded(tmp_path: Path) -> None:
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    (elsewhere / "id_rsa").write_text("private")
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / "step-9").symlink_to(elsewhere, target_is_directory=True)
    sent: list[int] = []
    lines: list[str] = []
    uploader = CheckpointUploader(SendsBy(lambda path, step: sent.append(step) or UploadOutcome.PUBLISHED),
                                  lambda done: None, log=lines.append)
    uploader.offer(step_folder(9, checkpoints / "step-9"))
    assert uploader.drain(timeout=10)
    uploader.close()
    assert sent == [] and any("step-9" in line and "links are never followed" in line for line in lines), lines


@pytest.mark.parametrize("disk_state", ["no inode left", "read-only"])
def test_without_room_for_a_staging_view_a_step_fails_while_the_command_runs_and_goes_up_once_it_stopped(
    tmp_path: Path, disk_state: str
) -> None:
    """A real tmpfs: while the command may still rewrite the checkpoint, a step that cannot be staged
    fails (said, and warned in status); once the command has stopped, the same step goes up from its
    own files."""
    sent: list[tuple[Path, bytes]] = []
    lines: list[str] = []
    warnings: list[UploadWarning] = []

    def upload(path: Path, step: int) -> UploadOutcome:
        sent.append((path, (path / "state.pt").read_bytes()))
        return UploadOutcome.PUBLISHED

    with tiny_tmpfs(tmp_path / "disk", inodes=32) as disk:
        if disk_state == "no inode left":
            for fill in fill_inodes(disk)[:2]:  # the command's last save takes the two last inodes
                fill.unlink()
        checkpoint = make_checkpoint(disk, 10)
        if disk_state == "read-only":
            remount_read_only(disk)
        uploader = CheckpointUploader(SendsBy(upload), lambda done: None, log=lines.append, warn=warnings.append)
        assert uploader.offer(step_folder(10, checkpoint))
        assert uploader.drain(timeout=10)
        assert sent == [] and uploader.uploaded_step is None
        assert [line for line in lines if "step 10 failed: staging step-10" in line], lines
        assert len(warnings) == 1 and warnings[0].message.startswith(UPLOADS_FAILING)
        assert warnings[0].cause.startswith(f"staging in {disk}")
        again = uploader.offer(step_folder(10, checkpoint), retry=True, writer_done=True)
        assert again, "the command stopped: offered again"
        assert uploader.drain(timeout=10)
        uploader.close()
        assert sent == [(checkpoint, b"x" * 110)] and uploader.uploaded_step == 10
        assert any("so step-10 is uploaded from its own files" in line for line in lines), lines
        assert warnings[-1].message == "", "the warning is taken back once the step is up"
        assert not [p for p in disk.iterdir() if p.name.startswith(".upload-")]


def test_a_step_s3_can_never_take_is_kept_as_refused_and_a_bad_minute_is_not(tmp_path: Path) -> None:
    """Why no retry can send a step (a key over S3's 1024 bytes) is kept for the final wait, which then ends at
    once; S3 having a bad minute leaves the step open to a retry."""

    def upload(path: Path, step: int) -> UploadOutcome:
        if step == 1:
            raise RemoteStoreError("step 1: S3 cannot take 'x…' (a key over 1024 bytes)\nmore",
                                   cause=FailureCause.LEFT_OUT)
        raise RemoteStoreError("S3 is having a bad minute")

    uploader = CheckpointUploader(SendsBy(upload), lambda done: None, log=lambda line: None)
    for step in (1, 2):
        uploader.offer(step_folder(step, make_checkpoint(tmp_path, step)))
        assert uploader.drain(timeout=10)
    uploader.close()
    assert uploader.refusal(1) == ("step 1: S3 cannot take 'x…' (a key over 1024 bytes)", FailureCause.LEFT_OUT)
    assert uploader.refusal(2) is None and uploader.uploaded_step is None
