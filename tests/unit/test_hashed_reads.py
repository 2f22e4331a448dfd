"""A file read once for its upload: the block SHA-256s are those a separate read gives of the same bytes, and
the SHA-256 S3 may hold is that of the one body or of the parts' SHA-256s."""

from __future__ import annotations

import base64
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from spot_trainer.storage.files.checksums import file_blocks
from spot_trainer.storage.files.hashed_reads import HashedRead
from spot_trainer.storage.files.regular_files import NotARegularFile

BLOCK = 1000


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("size", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK, 3 * BLOCK + 7])
@pytest.mark.parametrize("part", [300, BLOCK, 2500])
def test_blocks_of_parts_read_in_order_are_those_of_the_file(tmp_path: Path, size: int, part: int) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(size))
    with HashedRead(path, block_bytes=BLOCK) as read:
        assert not read.seekable()  # s3transfer then reads it once, in order, a part per read
        parts = list(iter(lambda: read.read(part), b""))
    with ThreadPoolExecutor(2) as pool:
        expected = [future.result() for future in file_blocks(path, pool, BLOCK)]
    assert read.blocks() == expected and read.sent == read.size == size
    assert b"".join(parts) == path.read_bytes()


def test_what_s3_may_hold_is_the_body_s_sha256_or_the_parts_composite(tmp_path: Path) -> None:
    data = os.urandom(2500)
    path = tmp_path / "model.bin"
    path.write_bytes(data)
    with HashedRead(path) as whole:
        assert whole.read() == data
    assert b64(hashlib.sha256(data).digest()) in whole.s3_checksums()
    with HashedRead(path) as parted:
        while parted.read(1000):
            pass
    composite = hashlib.sha256(b"".join(hashlib.sha256(data[at:at + 1000]).digest() for at in (0, 1000, 2000)))
    assert parted.s3_checksums() == {b64(composite.digest())}


def test_an_empty_file_is_the_sha256_of_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with HashedRead(path) as read:
        assert read.read() == b""
    assert read.s3_checksums() == {b64(hashlib.sha256(b"").digest())}
    assert read.blocks() == [hashlib.sha256(b"").hexdigest()]


def test_a_link_or_a_fifo_is_never_read(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError):
        HashedRead(tmp_path / "link")
    with pytest.raises(NotARegularFile):
        HashedRead(tmp_path / "fifo")

