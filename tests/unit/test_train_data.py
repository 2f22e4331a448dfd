"""Data for the built-in trainer: deterministic, resumable order; local and S3 formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from spot_trainer.builtin.data import BatchOrder, DataError, load_dataset


def test_an_epoch_visits_every_sample_once_and_the_next_epoch_reshuffles() -> None:
    order = BatchOrder(size=12, seed=5)
    epoch0 = np.concatenate([order.next_indices(4) for _ in range(3)])
    epoch1 = np.concatenate([order.next_indices(4) for _ in range(3)])

    assert sorted(epoch0.tolist()) == list(range(12)) == sorted(epoch1.tolist())
    assert epoch0.tolist() != epoch1.tolist() and order.epoch == 1


def test_order_restored_from_its_state_continues_identically() -> None:
    uninterrupted = BatchOrder(size=10, seed=1)
    interrupted = BatchOrder(size=10, seed=1)
    for _ in range(4):  # crosses an epoch boundary (ragged tail of 10 % 3 dropped)
        uninterrupted.next_indices(3)
        interrupted.next_indices(3)
    resumed = BatchOrder(size=10, seed=1)
    resumed.load_state_dict(interrupted.state_dict())

    for _ in range(5):
        assert resumed.next_indices(3).tolist() == uninterrupted.next_indices(3).tolist()


def test_text_directory_is_read_in_file_name_order_as_next_byte_windows(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_bytes(b"world")
    (tmp_path / "a.txt").write_bytes(b"hello ")
    dataset = load_dataset("lm", str(tmp_path), seed=0, context=4, cache_dir=tmp_path / "cache")

    inputs, targets = dataset.batch(np.array([0, 1]))
    assert len(dataset) == 2
    assert bytes(inputs[0].tolist()) == b"hell" and bytes(targets[0].tolist()) == b"ello"
    assert bytes(inputs[1].tolist()) == b"o wo" and bytes(targets[1].tolist()) == b" wor"


def test_image_directory_accepts_channels_last_uint8(tmp_path: Path) -> None:
    images = np.random.default_rng(0).integers(0, 256, size=(5, 32, 32, 3), dtype=np.uint8)
    np.save(tmp_path / "images.npy", images)
    np.save(tmp_path / "labels.npy", np.arange(5))
    dataset = load_dataset("resnet", str(tmp_path), seed=0, context=0, cache_dir=tmp_path / "cache")

    inputs, labels = dataset.batch(np.array([3]))
    assert inputs.shape == (1, 3, 32, 32) and labels.tolist() == [3]
    expected = (torch.from_numpy(images[3]).permute(2, 0, 1).float() / 255 - 0.5) / 0.25
    assert torch.equal(inputs[0], expected)


def test_s3_prefix_is_mirrored_into_the_cache_and_reused(s3, bucket: str, tmp_path: Path) -> None:
    s3.put_object(Bucket=bucket, Key="corpus/part-1.txt", Body=b"abcdefgh")
    s3.put_object(Bucket=bucket, Key="corpus/part-2.txt", Body=b"ijklmnop")
    s3.put_object(Bucket=bucket, Key="other/skip.txt", Body=b"not this")
    cache = tmp_path / "cache"

    dataset = load_dataset("lm", f"s3://{bucket}/corpus", seed=0, context=7, cache_dir=cache)
    assert bytes(dataset.inputs.tolist()) == b"abcdefghijklmnop"
    mirrored = cache / bucket / "corpus" / "part-1.txt"
    first_mtime = mirrored.stat().st_mtime_ns

    load_dataset("lm", f"s3://{bucket}/corpus/", seed=0, context=7, cache_dir=cache)
    assert mirrored.stat().st_mtime_ns == first_mtime  # same size: not downloaded again
    assert sorted(p.name for p in (cache / bucket / "corpus").iterdir()) == ["part-1.txt", "part-2.txt"]


def test_missing_s3_bucket_or_empty_prefix_is_one_clear_error(s3, bucket: str, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=f"s3://{bucket}/nothing: no objects under this prefix"):
        load_dataset("lm", f"s3://{bucket}/nothing", seed=0, context=4, cache_dir=tmp_path)
    with pytest.raises(DataError, match="NoSuchBucket"):
        load_dataset("lm", "s3://no-such-bucket-here/x", seed=0, context=4, cache_dir=tmp_path)
