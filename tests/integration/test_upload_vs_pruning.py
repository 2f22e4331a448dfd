"""A trainer pruning its old checkpoints while a slow upload still reads one of them cannot keep S3 stale.

The built-in local store keeps only the newest checkpoint here (keep=1) and writes one every 0.2 s;
each upload goes through a proxy that adds a delay to every request with a body, so one upload spans
many checkpoint intervals: without a private view of the checkpoint every upload would lose its files.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from localcloud.moto_server import MotoServer
from spot_trainer.storage.files.local import prune_checkpoints, write_checkpoint
from spot_trainer.storage.files.names import checkpoint_name
from spot_trainer.storage.files.staging import STAGING_PREFIX
from spot_trainer.storage.saves import layouts
from spot_trainer.storage.steps.step_sender import StepSender
from spot_trainer.storage.steps.uploader import CheckpointUploader, Uploaded
from tests.integration.remote_helpers import small_part_store
from tests.support.s3_proxy import FaultProxy

KEEP, INTERVAL_S, DELAY_S, WRITING_S = 1, 0.2, 0.4, 6.0
PARAMETERS = 1_800_000  # float32: a 7.2 MB checkpoint, two multipart parts


@pytest.fixture
def slow_s3(moto_server: MotoServer, aws_env: dict[str, str]) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.port, delay=DELAY_S) as proxy:
        yield proxy


def train_and_prune(directory: Path, stop: threading.Event) -> int:
    """A trainer's checkpoint rhythm: write step N, keep the newest KEEP, wait an interval."""
    step = 0
    while not stop.is_set():
        step += 1
        write_checkpoint(directory, step, {"weights": torch.full((PARAMETERS,), float(step))})
        prune_checkpoints(directory, KEEP)
        stop.wait(INTERVAL_S)
    return step


def test_uploads_slower_than_pruning_still_publish_while_training_runs(
    slow_s3: FaultProxy, bucket: str, tmp_path: Path
) -> None:
    store = small_part_store(bucket, "prune", endpoint=slow_s3.endpoint)
    directory = tmp_path / "checkpoints"
    results: list[Uploaded] = []
    failures: list[str] = []
    uploader = CheckpointUploader(StepSender(store), results.append,
                                  log=failures.append)
    stop = threading.Event()
    final: list[int] = []
    writer = threading.Thread(target=lambda: final.append(train_and_prune(directory, stop)))
    writer.start()
    deadline = time.monotonic() + WRITING_S
    try:
        while time.monotonic() < deadline:  # the agent's poll loop: offer the newest, never wait on S3
            if newest := layouts.newest_complete(directory):
                uploader.offer(newest)
            time.sleep(0.05)
    finally:
        stop.set()
        writer.join()
    published_while_training = [r.step for r in results if r.published]
    newest = layouts.newest_complete(directory, writer_done=True)
    assert newest is not None and newest.step == final[0]
    uploader.offer(newest)
    assert uploader.drain(timeout=60)
    uploader.close()

    assert failures == [], "an upload lost its checkpoint to pruning"
    upload_seconds = max(r.seconds for r in results)
    assert upload_seconds > KEEP * INTERVAL_S * 3, "the upload must span several checkpoint intervals"
    # S3 moved on while training ran, one upload behind at most, not only once training stopped.
    assert len(published_while_training) >= WRITING_S / upload_seconds - 2, published_while_training
    assert store.latest_step() == final[0]
    assert not list(directory.glob(STAGING_PREFIX + "*")), "staged views are released after their upload"
    assert [p.name for p in directory.iterdir() if p.name.startswith("step-")] == [checkpoint_name(final[0])]
