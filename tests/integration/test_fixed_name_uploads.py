"""A checkpoint kept under one name, against S3: every whole version goes up from a private copy, with the
files beside it, and comes back under the same names; a rewrite torn by a power-off never costs the last
whole version, and a copy that caught a rewrite is never published."""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from pathlib import Path

import torch

from localcloud.moto_server import MotoServer
from spot_trainer.storage.files import staging
from spot_trainer.storage.saves import layouts
from spot_trainer.storage.steps.step_sender import StepSender
from spot_trainer.storage.steps.uploader import CheckpointUploader, Uploaded
from tests.integration.remote_helpers import small_part_store

SETTLED = time.time() - 60


def save(path: Path, epoch: int, seed: int) -> bytes:
    """The ImageNet example's save: the epoch and the weights in one dict, rewritten in place."""
    torch.save({"epoch": epoch, "state_dict": {"w": torch.full((50_000,), float(seed))}}, path)
    os.utime(path, (SETTLED, SETTLED))
    return path.read_bytes()


def uploaded_newest(directory: Path, uploader: CheckpointUploader) -> int | None:
    newest = layouts.newest_complete(directory)
    if newest is not None:
        uploader.offer(newest)
    assert uploader.drain(timeout=60)
    return uploader.uploaded_step


def test_the_pair_goes_up_and_comes_back_under_its_names_and_a_torn_rewrite_costs_nothing(
    moto_server: MotoServer, aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    store = small_part_store(bucket, "fixed")
    results: list[Uploaded] = []
    lines: list[str] = []
    uploader = CheckpointUploader(StepSender(store), results.append,
                                  log=lines.append)
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    try:
        latest = save(directory / "checkpoint.pth.tar", 5, seed=5)
        best = save(directory / "model_best.pth.tar", 3, seed=3)
        assert uploaded_newest(directory, uploader) == 5
        assert not list(directory.glob(f"{staging.STAGING_PREFIX}*")), "the private copy is gone after upload"
        # A power-off halfway through the next torch.save: the only local copy is torn.
        next_version = save(tmp_path / "next.pth.tar", 6, seed=6)
        (directory / "checkpoint.pth.tar").write_bytes(next_version[: len(next_version) // 2])
        assert uploaded_newest(directory, uploader) == 5, "nothing torn is offered"
    finally:
        uploader.close()
    assert store.latest_step() == 5
    restored_into = tmp_path / "replacement"
    restored = store.restore(restored_into)
    assert restored == restored_into / "checkpoint.pth.tar"
    assert store.restored_step == 5
    assert sorted(path.name for path in restored_into.iterdir()) == ["checkpoint.pth.tar", "model_best.pth.tar"]
    assert (restored_into / "checkpoint.pth.tar").read_bytes() == latest
    assert (restored_into / "model_best.pth.tar").read_bytes() == best
    assert layouts.published(restored, 5).layout == layouts.Layout.FIXED
    assert not lines, lines


def test_a_rewrite_while_the_copy_is_taken_is_never_published(
    moto_server: MotoServer, aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    """A script that saves in place every 20 to 120 ms, so copies land on rewrites: whatever goes up restores
    whole, at the step its own archive states."""
    store = small_part_store(bucket, "fixed-busy")
    uploader = CheckpointUploader(StepSender(store), lambda up: None,
                                  log=lambda line: None)
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    stop = threading.Event()

    def rewrite_in_place() -> None:
        epoch = 0
        while not stop.is_set():
            epoch += 1
            save(directory / "ckpt.pt", epoch, seed=epoch)
            stop.wait(0.02 + 0.1 * random.random())

    writer = threading.Thread(target=rewrite_in_place)
    writer.start()
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            if (newest := layouts.newest_complete(directory)) is not None:
                uploader.offer(newest)
            time.sleep(0.02)
    finally:
        stop.set()
        writer.join()
        assert uploader.drain(timeout=60)
        uploader.close()
    published = store.latest_step()
    assert published is not None, "some version went up"
    restored = store.restore(tmp_path / "replacement")
    assert restored is not None and store.restored_step == published
    state = torch.load(restored, weights_only=True)
    assert state["epoch"] == published
    assert torch.equal(state["state_dict"]["w"], torch.full((50_000,), float(published)))
    assert hashlib.sha256(restored.read_bytes()).hexdigest()
