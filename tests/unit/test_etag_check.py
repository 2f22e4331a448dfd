"""A downloaded file is compared with S3's size and ETag, for one-PUT and multipart objects alike."""

from __future__ import annotations

import hashlib
from pathlib import Path

from spot_trainer.ops.etag_check import MIB, etag_problem, part_sizes


def multipart_etag(data: bytes, part: int) -> str:
    md5s = [hashlib.md5(data[i:i + part]).digest() for i in range(0, len(data), part)]
    return f'"{hashlib.md5(b"".join(md5s)).hexdigest()}-{len(md5s)}"'


def test_a_single_put_object_matches_by_md5_and_a_changed_byte_does_not(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"weights")
    etag = f'"{hashlib.md5(b"weights").hexdigest()}"'
    assert etag_problem(path, 7, etag) == ""
    path.write_bytes(b"weightz")
    assert etag_problem(path, 7, etag) == "its MD5 differs from the ETag S3 holds"
    assert etag_problem(path, 8, etag) == "7 bytes, S3 holds 8"


def test_multipart_objects_match_at_their_part_size(tmp_path: Path) -> None:
    data = bytes(range(256)) * (4096 * 21 + 3)  # 21 MiB and a bit
    path = tmp_path / "f"
    path.write_bytes(data)
    for part in (8 * MIB, 5 * MIB):
        assert etag_problem(path, len(data), multipart_etag(data, part)) == ""
    changed = data[:-1] + b"\x00"
    assert etag_problem(path, len(data), multipart_etag(changed, 8 * MIB)).startswith("no part size")


def test_part_sizes_put_the_runtimes_eight_mib_first() -> None:
    assert part_sizes(17 * MIB, 3)[0] == 8 * MIB
    assert all(-(-17 * MIB // size) == 3 for size in part_sizes(17 * MIB, 3))
