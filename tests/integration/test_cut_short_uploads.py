"""A single-file checkpoint proven whole when the agent looked, then cut short or rewritten in place before
its upload began, never reaches S3 and is never published; the next whole one is."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from spot_trainer.storage.files import whole_files
from spot_trainer.storage.saves import layouts
from spot_trainer.storage.steps.remote import RemoteStore, RemoteStoreError
from spot_trainer.storage.upload_outcome import UploadOutcome
from tests.integration.remote_helpers import small_part_store


@pytest.fixture
def store(s3: Any, bucket: str) -> RemoteStore:
    return small_part_store(bucket, "cnn")


def saved(path: Path, step: int) -> Path:
    torch.save({"model": torch.nn.Linear(64, 64).state_dict(), "step": step}, path)
    written = time.time() - whole_files.SETTLE_SECONDS - 1
    os.utime(path, (written, written))
    return path


def test_a_file_cut_short_after_it_was_checked_is_not_uploaded(store: RemoteStore, s3: Any, bucket: str,
                                                               tmp_path: Path) -> None:
    path = saved(tmp_path / "checkpoint_40.pt", 40)
    checked = layouts.newest_complete(tmp_path)
    assert checked is not None and checked.path == path  # whole and still: it would go up at once
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])  # the script's next save over the same name
    with pytest.raises(RemoteStoreError, match="checkpoint_40.pt is no longer whole"):
        store.upload(checked.path, checked.step)
    assert store.latest_step() is None
    assert s3.list_objects_v2(Bucket=bucket, Prefix="cnn/").get("KeyCount", 0) == 0
    again = saved(tmp_path / "checkpoint_60.pt", 60)
    assert store.upload(again, 60) is UploadOutcome.PUBLISHED and store.latest_step() == 60
