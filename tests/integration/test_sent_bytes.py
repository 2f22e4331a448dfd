"""A checkpoint file rewritten in place while it goes up, against moto server: the manifest's checksums are
those of the bytes sent, so what is published restores whole; what S3 holds other than was sent, or a step
damaged since, is never called whole."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from spot_trainer.storage.failure_causes import FailureCause
from spot_trainer.storage.files.hashed_reads import HashedRead
from spot_trainer.storage.steps.remote import RemoteStore, RemoteStoreError
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.remote_helpers import MB, make_checkpoint, small_part_store

SIZE = 12 * MB + 3  # three 5 MB parts: the rewrite lands between the first part read and the last
BUSY_SIZE = 6 * MB  # two parts


@pytest.fixture
def store(s3: Any, bucket: str) -> RemoteStore:
    return small_part_store(bucket, "job-a", keep=10)


def rewrite_keeping_time(path: Path) -> None:
    """New bytes over the whole file, in place and at the same size, its modification time put back: what
    neither its size nor its time shows."""
    before = path.stat()
    with path.open("r+b") as stream:
        stream.write(os.urandom(before.st_size))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_same_size_rewrite_after_the_first_part_is_sent_publishes_what_went_up(
    store: RemoteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = make_checkpoint(tmp_path / "local", 10, sizes={"model.bin": SIZE})
    model = local / "model.bin"
    first = model.read_bytes()[:5 * MB]
    real_read = HashedRead.read

    def read_then_rewrite(self: HashedRead, amount: int = -1) -> bytes:
        data = real_read(self, amount)
        if self.sent == len(data) == 5 * MB:  # the first part is out; the rest is read after the rewrite
            rewrite_keeping_time(model)
        return data

    monkeypatch.setattr(HashedRead, "read", read_then_rewrite)
    assert store.upload(local, 10) is UploadOutcome.PUBLISHED
    sent = first + model.read_bytes()[5 * MB:]
    assert sent != model.read_bytes()
    restored = store.restore(tmp_path / "restored")
    assert restored is not None and store.restored_step == 10 and not store.damaged_steps
    assert (restored / "model.bin").read_bytes() == sent
    assert store.not_whole(10) == ""


def flip_a_byte_of_the_second_part(request: Any, **kwargs: Any) -> None:
    """Bytes changed after botocore took their checksum, as a faulty path to S3 would (moto keeps them)."""
    if "partNumber=2" in request.url:
        body = bytearray(request.body.read())
        body[len(body) // 2] ^= 0xFF
        request.body = bytes(body)


def test_bytes_s3_holds_other_than_those_read_are_not_published(store: RemoteStore, tmp_path: Path) -> None:
    local = make_checkpoint(tmp_path / "local", 4, sizes={"model.bin": SIZE})
    store.s3.meta.events.register("before-send.s3.UploadPart", flip_a_byte_of_the_second_part)
    with pytest.raises(RemoteStoreError) as caught:
        store.upload(local, 4)
    assert str(caught.value).endswith("model.bin: S3 holds other bytes than were sent (its SHA-256 differs): "
                                      "not published"), caught.value
    assert caught.value.cause == FailureCause.NOT_AS_SENT
    assert store.latest_step() is None


def test_a_published_step_damaged_since_is_not_whole(store: RemoteStore, s3: Any, bucket: str,
                                                     tmp_path: Path) -> None:
    local = make_checkpoint(tmp_path / "local", 6, sizes={"model.bin": SIZE, "meta.json": 64})
    assert store.upload(local, 6) is UploadOutcome.PUBLISHED
    assert store.not_whole(6) == ""
    key = store.step_prefix(6) + "meta.json"
    s3.put_object(Bucket=bucket, Key=key, Body=os.urandom(64), ChecksumAlgorithm="SHA256")
    assert store.not_whole(6) == "meta.json: S3 holds other bytes than its manifest describes (its SHA-256 differs)"
    s3.delete_object(Bucket=bucket, Key=key)
    assert store.not_whole(6) == "meta.json: not in S3"


REWRITER = """
import os, sys, time
path, stop = sys.argv[1], sys.argv[2]
size = os.path.getsize(path)
while not os.path.exists(stop):
    before = os.stat(path)
    with open(path, "r+b") as stream:
        stream.write(os.urandom(size))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    time.sleep(0.002)
"""


@contextmanager
def busy_cores(count: int = 2) -> Iterator[None]:
    """`count` processes that spin, as a loaded machine's other work would."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_under_two_busy_processes_a_file_rewritten_throughout_its_upload_never_publishes_a_damaged_step(
    store: RemoteStore, tmp_path: Path
) -> None:
    """A hostile writer rewrites the file in place at the same size for the whole upload, its time put back,
    10 times: each step is published whole or refused, never published damaged."""
    outcomes: list[str] = []
    with busy_cores():
        for step in range(1, 11):
            local = make_checkpoint(tmp_path / f"local-{step}", step, sizes={"model.bin": BUSY_SIZE})
            stop = tmp_path / f"stop-{step}"
            rewriter = subprocess.Popen([sys.executable, "-c", REWRITER, str(local / "model.bin"), str(stop)])
            time.sleep(0.05)  # it is rewriting before the first byte is read
            try:
                published = store.upload(local, step)
            except RemoteStoreError as error:
                assert error.cause == FailureCause.REWRITTEN, error
                published = UploadOutcome.NOT_PUBLISHED
            finally:
                stop.touch()
                rewriter.wait(timeout=30)
            outcomes.append(restored_whole(store, step, tmp_path / f"restored-{step}")
                            if published is UploadOutcome.PUBLISHED else "refused")
    assert outcomes.count("damaged") == 0 and "whole" in outcomes, outcomes
    assert not store.damaged_steps


def restored_whole(store: RemoteStore, step: int, into: Path) -> str:
    """A full restore of `step`: every block downloaded and checked against its manifest."""
    restored = store.restore_at_or_below(into, step)
    if restored is None or store.restored_step != step:
        return "damaged"
    manifest = store.get_json(store.step_prefix(step) + "MANIFEST.json", absolute=True) or {}
    blocks = manifest["files"]["model.bin"]["sha256_blocks"]
    assert blocks == [hashlib.sha256((restored / "model.bin").read_bytes()).hexdigest()]
    return "whole"
