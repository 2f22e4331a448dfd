"""The S3 checkpoint store against moto server over HTTP, with real bytes and a real SIGKILL."""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spot_trainer.storage.steps import checkpoint_restore
from spot_trainer.storage.steps.remote import RemoteStore, RemoteStoreError
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.remote_helpers import MB, digests, make_checkpoint, names_and_bytes, small_part_store


@pytest.fixture
def store(s3: Any, bucket: str) -> RemoteStore:
    return small_part_store(bucket, "job-a", keep=3)


def test_directory_checkpoint_round_trip(store: RemoteStore, tmp_path: Path) -> None:
    local = make_checkpoint(tmp_path / "local", 10, sizes={"model.pt": 12 * MB + 3, "rng/state.bin": 999})
    assert store.upload(local, 10) is UploadOutcome.PUBLISHED
    manifest = store.get_json(store.step_prefix(10) + "MANIFEST.json", absolute=True)
    assert manifest is not None and manifest["kind"] == "directory"
    assert manifest["files"]["model.pt"]["size"] == 12 * MB + 3
    restored = store.restore(tmp_path / "restored")
    assert restored == tmp_path / "restored" / "step-10"
    assert digests(restored) == digests(local)
    assert [p.name for p in (tmp_path / "restored").iterdir()] == ["step-10"]  # no temp left behind


def test_single_file_checkpoint_round_trip(store: RemoteStore, tmp_path: Path) -> None:
    local = tmp_path / "step-7.pt"
    local.write_bytes(os.urandom(6 * MB + 1))
    assert store.upload(local, 7) is UploadOutcome.PUBLISHED
    assert store.latest_step() == 7
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and restored.is_file() and restored.name == "step-7.pt"
    assert restored.read_bytes() == local.read_bytes()


def test_nothing_published_restores_nothing(store: RemoteStore, tmp_path: Path) -> None:
    assert store.latest_step() is None
    assert store.restore(tmp_path / "restored") is None


def test_older_step_never_replaces_newer_latest(store: RemoteStore, tmp_path: Path) -> None:
    assert store.upload(make_checkpoint(tmp_path, 20), 20) is UploadOutcome.PUBLISHED
    assert store.upload(make_checkpoint(tmp_path, 10), 10) is UploadOutcome.NOT_PUBLISHED
    assert store.upload(make_checkpoint(tmp_path / "again", 20), 20) is UploadOutcome.NOT_PUBLISHED
    assert store.latest_step() == 20
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and digests(restored) == digests(tmp_path / "step-20")


def test_missing_checkpoint_is_one_clear_error(store: RemoteStore, tmp_path: Path) -> None:
    with pytest.raises(RemoteStoreError, match="step-3 is neither a file nor a directory"):
        store.upload(tmp_path / "step-3", 3)
    assert store.latest_step() is None


def damage_object(s3: Any, bucket: str, key: str) -> None:
    body = bytearray(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0xFF
    s3.put_object(Bucket=bucket, Key=key, Body=bytes(body))


@pytest.mark.parametrize("damage", ["flipped byte", "missing object", "missing manifest"])
def test_damaged_latest_falls_back_to_previous(
    damage: str, store: RemoteStore, s3: Any, bucket: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = make_checkpoint(tmp_path / "local", 1)
    assert store.upload(good, 1) is UploadOutcome.PUBLISHED
    assert store.upload(make_checkpoint(tmp_path / "local", 2), 2) is UploadOutcome.PUBLISHED
    prefix = store.step_prefix(2)
    if damage == "flipped byte":
        damage_object(s3, bucket, prefix + "model.pt")
    else:
        s3.delete_object(Bucket=bucket, Key=prefix + ("optim/state.pt" if damage == "missing object"
                                                      else "MANIFEST.json"))
    with caplog.at_level(logging.WARNING, logger="spot_trainer.storage.steps.remote"):
        restored = store.restore(tmp_path / "restored")
    assert restored == tmp_path / "restored" / "step-1"
    assert digests(restored) == digests(good)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "step 2" in warnings[0]
    assert sorted(p.name for p in (tmp_path / "restored").iterdir()) == ["step-1"]


def test_retention_keeps_the_newest_published_and_drops_abandoned(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    store = small_part_store(bucket, "job-r", keep=2)
    for step in (1, 2, 3):
        assert store.upload(make_checkpoint(tmp_path, step, sizes={"w": 1000}), step) is UploadOutcome.PUBLISHED
    s3.put_object(Bucket=bucket, Key=store.step_prefix(4) + "w", Body=b"partial, never published")
    assert store.upload(make_checkpoint(tmp_path, 5, sizes={"w": 1000}), 5) is UploadOutcome.PUBLISHED
    assert store.remote_steps() == [3, 5]
    assert store.latest_step() == 5


def test_status_and_events(store: RemoteStore) -> None:
    assert store.get_json("status.json") is None
    store.put_json("status.json", {"state": "RUNNING", "step": 3})
    assert store.get_json("status.json") == {"state": "RUNNING", "step": 3}
    store.append_event("start", attempt=1)
    store.append_event("interruption", step=40)
    events = store.events()
    assert [e["kind"] for e in events] == ["start", "interruption"]
    assert events[1]["step"] == 40 and events[1]["instance"] == store.instance


UPLOAD_CHILD = """
import sys
from pathlib import Path
from spot_trainer.storage.steps.remote import RemoteStore, RemoteStoreError
from spot_trainer.storage.s3.s3client import s3_client, transfer_config
store = RemoteStore(s3_client(), sys.argv[1], sys.argv[2],
                    transfer_config=transfer_config(chunk_bytes=5 * 1024 * 1024, concurrency=1))
store.upload(Path(sys.argv[3]), int(sys.argv[4]))
"""


def wait_for_parts(s3: Any, bucket: str, prefix: str, child: subprocess.Popen, timeout: float = 60) -> None:
    """Return once some part of a multipart upload under `prefix` is stored (the upload is half done)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.poll() is None:
        for upload in s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", []):
            parts = s3.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
            if parts.get("Parts"):
                return
        time.sleep(0.02)
    raise AssertionError("the upload finished or never started before it could be interrupted")


def test_sigkill_mid_upload_leaves_latest_on_previous(
    store: RemoteStore, s3: Any, bucket: str, tmp_path: Path
) -> None:
    previous = make_checkpoint(tmp_path / "local", 1)
    assert store.upload(previous, 1) is UploadOutcome.PUBLISHED
    big = make_checkpoint(tmp_path / "local", 2, sizes={"model.pt": 160 * MB, "small.bin": 10})
    child = subprocess.Popen([sys.executable, "-c", UPLOAD_CHILD, bucket, "job-a", str(big), "2"])
    try:
        wait_for_parts(s3, bucket, store.step_prefix(2), child)
    finally:
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    assert store.latest_step() == 1
    assert store.get_json(store.step_prefix(2) + "MANIFEST.json", absolute=True) is None
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and digests(restored) == digests(previous)
    assert json.loads(s3.get_object(Bucket=bucket, Key="job-a/latest.json")["Body"].read())["step"] == 1


@pytest.mark.slow
def test_sigkill_at_random_moments_never_publishes_a_partial_checkpoint(
    store: RemoteStore, tmp_path: Path
) -> None:
    """Whenever the uploader dies, latest.json names a complete checkpoint that restores intact."""
    chooser = random.Random(2026)
    published = {1: digests(make_checkpoint(tmp_path / "local", 1))}
    assert store.upload(tmp_path / "local" / "step-1", 1) is UploadOutcome.PUBLISHED
    for step in range(2, 8):
        local = make_checkpoint(tmp_path / "local", step, sizes={"model.pt": 24 * MB, "meta.json": 80})
        argv = [sys.executable, "-c", UPLOAD_CHILD, store.bucket, "job-a", str(local), str(step)]
        child = subprocess.Popen(argv)
        time.sleep(chooser.uniform(0.3, 3.0))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        latest = store.latest_step()
        assert latest in (max(published), step)
        if latest == step:
            published[step] = digests(local)
        restored = store.restore(tmp_path / f"restored-{step}")
        assert restored is not None and digests(restored) == published[latest]


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "../../etc"])
def test_a_manifest_naming_no_plain_checkpoint_restores_nothing_outside_the_folder(
    store: RemoteStore, tmp_path: Path, name: str
) -> None:
    older, newer = (make_checkpoint(tmp_path / "local", step, sizes={"model.pt": 1000}) for step in (10, 20))
    assert store.upload(older, 10) is store.upload(newer, 20) is UploadOutcome.PUBLISHED
    key = store.step_prefix(20) + "MANIFEST.json"
    manifest = store.get_json(key, absolute=True)
    store.s3.put_object(Bucket=store.bucket, Key=key, Body=json.dumps({**manifest, "name": name}).encode())
    folder = tmp_path / "home" / "checkpoints"
    folder.mkdir(parents=True)
    (tmp_path / "home" / "keep.txt").write_text("the user's")
    restored = store.restore(folder)
    assert restored == folder / "step-10", "the tampered step is damaged; the older one is restored"
    assert (tmp_path / "home" / "keep.txt").read_text() == "the user's"
    assert sorted(p.name for p in folder.iterdir()) == ["step-10"]


@pytest.mark.parametrize("body", [b"", b"<html>oops</html>", b'{"step": "ten"}', b"null", b"{}", b'{"step": -1}'])
def test_a_damaged_latest_record_is_named_and_what_s3_holds_decides(
    store: RemoteStore, tmp_path: Path, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    local = make_checkpoint(tmp_path / "local", 10, sizes={"model.pt": 1000})
    assert store.upload(local, 10) is UploadOutcome.PUBLISHED
    store.s3.put_object(Bucket=store.bucket, Key=store.key("latest.json"), Body=body)
    with caplog.at_level(logging.WARNING):
        assert store.latest_step() == 10
    assert "latest.json" in caplog.text and "newest complete: step 10" in caplog.text
    local = make_checkpoint(tmp_path / "local", 20, sizes={"model.pt": 1000})
    assert store.upload(local, 20) is UploadOutcome.PUBLISHED
    assert store.get_json("latest.json")["step"] == 20, "the next publish replaces the damaged record"


def test_a_full_disk_while_restoring_is_an_error_not_a_damaged_checkpoint(
    store: RemoteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = make_checkpoint(tmp_path / "local", 10, sizes={"model.pt": 1000})
    assert store.upload(local, 10) is UploadOutcome.PUBLISHED
    local = make_checkpoint(tmp_path / "local", 20, sizes={"model.pt": 1000})
    assert store.upload(local, 20) is UploadOutcome.PUBLISHED

    def full_disk(*args: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint_restore, "_download_all", full_disk)
    with pytest.raises(RemoteStoreError, match="cannot restore checkpoint step 20 .*No space left on device"):
        store.restore(tmp_path / "restored")  # never falls back to step 10 (nor, with none, to a fresh start)


def test_names_that_are_not_utf8_are_published_and_restored_byte_for_byte(store: RemoteStore, tmp_path: Path) -> None:
    local = make_checkpoint(tmp_path / "local", 5, sizes={"model.pt": 1000})
    odd = [b"w\xff.bin", b"notes-\xe9t\xe9.txt", b"100%.txt", b"tab\tand\x7f", b"\xed\xa0\x80 surrogate"]
    (local / os.fsdecode(b"sub\xfe")).mkdir()
    for index, name in enumerate(odd):
        (local / os.fsdecode(name)).write_bytes(os.urandom(100 + index))
    (local / os.fsdecode(b"sub\xfe/inner\xff")).write_bytes(b"deep")
    assert store.upload(local, 5) is UploadOutcome.PUBLISHED
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and names_and_bytes(restored) == names_and_bytes(local)
    keys = {item["Key"].rsplit("step-00000005/", 1)[1]
            for item in store.s3.list_objects_v2(Bucket=store.bucket, Prefix=store.step_prefix(5))["Contents"]}
    assert {"model.pt", "w%FF.bin", "100%25.txt", "tab%09and%7F", "sub%FE/inner%FF"} <= keys


def test_a_manifest_from_before_escaped_names_still_restores(store: RemoteStore, tmp_path: Path) -> None:
    """Manifests without `path_b64` name each file by its key, as every earlier release wrote them."""
    local = make_checkpoint(tmp_path / "local", 3, sizes={"model.pt": 1000, "100%.txt": 10})
    assert store.upload(local, 3) is UploadOutcome.PUBLISHED
    key = store.step_prefix(3) + "MANIFEST.json"
    manifest = store.get_json(key, absolute=True) or {}
    files = manifest["files"]
    store.s3.copy_object(Bucket=store.bucket, CopySource={"Bucket": store.bucket, "Key": store.step_prefix(3) +
                         "100%25.txt"}, Key=store.step_prefix(3) + "100%.txt")
    files["100%.txt"] = {k: v for k, v in files.pop("100%25.txt").items() if k != "path_b64"}
    store.s3.put_object(Bucket=store.bucket, Key=key, Body=json.dumps(manifest).encode())
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and digests(restored) == digests(local)


def test_a_file_whose_key_would_be_too_long_is_left_out_and_the_rest_published(
    store: RemoteStore, tmp_path: Path
) -> None:
    local = make_checkpoint(tmp_path / "local", 8, sizes={"model.pt": 1000})
    deep = local.joinpath(*["d" * 200] * 5)
    deep.mkdir(parents=True)
    (deep / "far.bin").write_bytes(b"far")
    told: list[tuple[int, list[str]]] = []
    store.on_left_out = lambda step, names: told.append((step, names))
    assert store.upload(local, 8) is UploadOutcome.PUBLISHED
    assert told == [(8, [(deep / "far.bin").relative_to(local).as_posix()])]
    manifest = store.get_json(store.step_prefix(8) + "MANIFEST.json", absolute=True) or {}
    assert manifest["left_out"] == told[0][1]
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and (restored / "model.pt").read_bytes() == (local / "model.pt").read_bytes()


def test_a_checkpoint_s3_can_take_none_of_is_not_published(store: RemoteStore, tmp_path: Path) -> None:
    local = tmp_path / "local" / "step-9"
    deep = local.joinpath(*["d" * 250] * 5)
    deep.mkdir(parents=True)
    (deep / "only.bin").write_bytes(b"x")
    with pytest.raises(RemoteStoreError, match="S3 can take none of its files") as caught:
        store.upload(local, 9)
    assert caught.value.cause == "file names S3 cannot take"
    assert store.latest_step() is None


def test_a_file_rewritten_in_place_during_its_upload_is_not_published(
    store: RemoteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = make_checkpoint(tmp_path / "local", 6, sizes={"model.pt": 1000})
    real_send = store.send_all

    def rewritten_meanwhile(*args: Any, **kwargs: Any) -> Any:
        sent = real_send(*args, **kwargs)
        time.sleep(0.01)  # a later modification time than the upload started from
        (local / "model.pt").write_bytes(b"y" * 1000)
        return sent

    monkeypatch.setattr(store, "send_all", rewritten_meanwhile)
    with pytest.raises(RemoteStoreError, match="model.pt changed while it was uploaded"):
        store.upload(local, 6)
    assert store.latest_step() is None
