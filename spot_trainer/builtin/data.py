"""Training data for the built-in models and the deterministic order they are read in.

Formats of a data directory (local, or an S3 prefix downloaded into a cache first):
- resnet: `images.npy` uint8 or float, shape (N, 32, 32, 3) or (N, 3, 32, 32); `labels.npy` ints (N,)
- lm:     every `*.txt` file, read as raw bytes and joined in file-name order
`--synthetic` generates a small learnable data set from the seed instead.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

IMAGE_SHAPE = (3, 32, 32)
NUM_CLASSES = 10


class DataError(ValueError):
    """The data cannot be used; the message names the file or prefix and what is wrong."""


@dataclass
class Dataset:
    """Samples addressed by index: image/label pairs, or byte windows of `context + 1`."""

    inputs: torch.Tensor
    targets: torch.Tensor | None  # None for the LM: targets are the inputs shifted by one byte
    context: int = 0

    def __len__(self) -> int:
        if self.targets is not None:
            return len(self.inputs)
        return (len(self.inputs) - 1) // self.context

    def batch(self, indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        if self.targets is not None:
            index = torch.from_numpy(indices)
            return self.inputs[index], self.targets[index]
        windows = torch.stack([self.inputs[i * self.context: i * self.context + self.context + 1]
                               for i in indices.tolist()])
        return windows[:, :-1], windows[:, 1:]


class BatchOrder:
    """A seeded permutation per epoch; the position within it is part of the resumable state."""

    def __init__(self, size: int, seed: int, epoch: int = 0, position: int = 0) -> None:
        self.size, self.seed, self.epoch, self.position = size, seed, epoch, position

    def next_indices(self, batch_size: int) -> np.ndarray:
        if self.position + batch_size > self.size:  # drop the ragged tail, start the next epoch
            self.epoch, self.position = self.epoch + 1, 0
        permutation = np.random.default_rng([self.seed, self.epoch]).permutation(self.size)
        indices = permutation[self.position: self.position + batch_size]
        self.position += batch_size
        return indices

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def augment_images(images: torch.Tensor) -> torch.Tensor:
    """Random crop with 4-pixel padding (numpy RNG) and random horizontal flips (torch RNG)."""
    dy, dx = np.random.randint(0, 9, size=2)
    padded = torch.nn.functional.pad(images, (4, 4, 4, 4))
    cropped = padded[:, :, dy: dy + 32, dx: dx + 32]
    flip = torch.rand(len(images)) < 0.5
    return torch.where(flip[:, None, None, None], cropped.flip(3), cropped)


def synthetic_dataset(model: str, seed: int, context: int) -> Dataset:
    rng = np.random.default_rng(seed)
    if model == "resnet":
        prototypes = rng.normal(size=(NUM_CLASSES, *IMAGE_SHAPE)).astype(np.float32)
        labels = rng.integers(0, NUM_CLASSES, size=2048)
        images = prototypes[labels] + rng.normal(scale=1.5, size=(len(labels), *IMAGE_SHAPE)).astype(np.float32)
        return Dataset(torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64)))
    words = ["spot", "train", "resume", "step", "save", "the", "a", "of", "and", "model", "loss", "check"]
    picks = random.Random(seed).choices(words, k=20_000)
    return token_dataset(" ".join(picks).encode(), context, "synthetic text")


def token_dataset(data: bytes, context: int, source: str) -> Dataset:
    if len(data) < context + 1:
        raise DataError(f"{source}: {len(data)} bytes of text, need at least {context + 1} for --context {context}")
    return Dataset(torch.frombuffer(bytearray(data), dtype=torch.uint8).long(), None, context)


def image_dataset(directory: Path) -> Dataset:
    try:
        images = np.load(directory / "images.npy", allow_pickle=False)
        labels = np.load(directory / "labels.npy", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise DataError(f"{directory}: cannot read images.npy/labels.npy: {error}") from None
    if images.ndim == 4 and images.shape[1:] == (32, 32, 3):
        images = images.transpose(0, 3, 1, 2)
    if images.ndim != 4 or images.shape[1:] != IMAGE_SHAPE:
        raise DataError(f"{directory / 'images.npy'}: shape {images.shape}, expected (N, 32, 32, 3) or (N, 3, 32, 32)")
    if labels.shape != (len(images),) or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"{directory / 'labels.npy'}: expected {len(images)} integer labels, "
                        f"got {labels.dtype} {labels.shape}")
    pixels = torch.from_numpy(np.ascontiguousarray(images)).float()
    if images.dtype == np.uint8:
        pixels = (pixels / 255.0 - 0.5) / 0.25
    return Dataset(pixels, torch.from_numpy(labels.astype(np.int64)))


def text_dataset(directory: Path, context: int) -> Dataset:
    files = sorted(directory.glob("*.txt"))
    if not files:
        raise DataError(f"{directory}: no *.txt files for the lm model")
    return token_dataset(b"".join(path.read_bytes() for path in files), context, str(directory))


def load_dataset(model: str, data: str | None, seed: int, context: int, cache_dir: Path) -> Dataset:
    """The data set named by --data (directory or s3://bucket/prefix), or synthetic when None."""
    if data is None:
        return synthetic_dataset(model, seed, context)
    if data.startswith("s3://"):
        directory = download_prefix(data, cache_dir)
    else:
        directory = Path(data)
    if not directory.is_dir():
        raise DataError(f"--data {data}: not a directory")
    dataset = image_dataset(directory) if model == "resnet" else text_dataset(directory, context)
    if len(dataset) == 0:
        raise DataError(f"--data {data}: no complete samples")
    return dataset


def download_prefix(uri: str, cache_dir: Path) -> Path:
    """Mirror every object under an S3 prefix into the cache; files already there with the same
    size are kept, new ones are downloaded to a temp name and renamed, so a crash leaves no half file."""
    import boto3  # only when S3 data is asked for
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _, prefix = uri[len("s3://"):].partition("/")
    if not bucket:
        raise DataError(f"--data {uri}: expected s3://bucket/prefix")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    target = cache_dir / bucket / prefix
    client = boto3.client("s3", config=Config(retries={"mode": "adaptive", "max_attempts": 10}))
    try:
        count = 0
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                relative = item["Key"][len(prefix):]
                if not relative or relative.endswith("/"):
                    continue
                count += 1
                local = target / relative
                if local.is_file() and local.stat().st_size == item["Size"]:
                    continue
                local.parent.mkdir(parents=True, exist_ok=True)
                partial = local.with_name(f".{local.name}.partial")
                client.download_file(bucket, item["Key"], str(partial))
                os.replace(partial, local)
    except (BotoCoreError, ClientError) as error:
        raise DataError(f"--data {uri}: {error}") from None
    if count == 0:
        raise DataError(f"--data {uri}: no objects under this prefix")
    return target


def default_cache_dir() -> Path:
    return Path(os.environ.get("SPOT_DATA_CACHE", Path.home() / ".cache" / "spot-trainer" / "data"))
