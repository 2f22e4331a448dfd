"""Checkpoints with real random bytes, and their digests, for the S3 store tests."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from spot_trainer.storage.s3.s3client import s3_client, transfer_config
from spot_trainer.storage.steps.remote import RemoteStore

MB = 1024 * 1024


def make_checkpoint(root: Path, step: int, *, sizes: dict[str, int] | None = None) -> Path:
    """A step-N directory checkpoint with nested files of random content."""
    path = root / f"step-{step}"
    sizes = sizes or {"model.pt": 3 * MB + 17, "optim/state.pt": 200_001, "meta.json": 64}
    for name, size in sizes.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(os.urandom(size))
    return path


def digests(path: Path) -> dict[str, str]:
    """Relative name → sha256 of every file under a checkpoint (or of the file itself)."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    base = path.parent if path.is_file() else path
    return {p.relative_to(base).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def small_part_store(bucket: str, job: str, endpoint: str | None = None, **kwargs: object) -> RemoteStore:
    """A store that uses multipart uploads for anything above 5 MB (S3's minimum part size)."""
    client = s3_client(endpoint_url=endpoint, max_attempts=10)
    config = transfer_config(chunk_bytes=5 * MB, concurrency=4)
    return RemoteStore(client, bucket, job, transfer_config=config, **kwargs)  # type: ignore[arg-type]


def names_and_bytes(root: Path) -> dict[bytes, bytes]:
    """Every file under `root` by its name's bytes (never decoded), with its content."""
    base = os.fsencode(root)
    return {os.path.relpath(path, base): Path(os.fsdecode(path)).read_bytes()
            for folder, _, names in os.walk(base) for path in (os.path.join(folder, name) for name in names)}
