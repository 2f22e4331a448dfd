"""Whether a downloaded file is the object S3 holds: its size, and its ETag recomputed from its bytes.

S3's ETag of an object uploaded in one PUT is the MD5 of its bytes; of a multipart upload it is the MD5
of the parts' MD5s, then "-" and the number of parts
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_Object.html, ETag; and
https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html). The part size is
not stored, so the sizes that give that many parts in whole MiB are tried, 8 MiB (the runtime's) first.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

MIB = 1024 * 1024
MOST_TRIED = 8  # part sizes tried for a multipart ETag; beyond that the size alone is compared
READ_BYTES = 4 * MIB


def etag_problem(path: Path, size: int, etag: str) -> str:
    """'' when the file matches, else what differs. `etag` as S3 lists it (quotes allowed)."""
    found = path.stat().st_size
    if found != size:
        return f"{found} bytes, S3 holds {size}"
    etag = etag.strip('"')
    digest, _, parts = etag.partition("-")
    if not parts:
        return "" if _whole_md5(path) == digest else "its MD5 differs from the ETag S3 holds"
    count = int(parts)
    for part_bytes in part_sizes(size, count)[:MOST_TRIED]:
        md5s = _md5_of_parts(path, part_bytes)
        if hashlib.md5(b"".join(bytes.fromhex(m) for m in md5s)).hexdigest() == digest:
            return ""
    return f"no part size in whole MiB gives its ETag {etag}"


def part_sizes(size: int, count: int) -> list[int]:
    """Part sizes in whole MiB that cut `size` bytes into exactly `count` parts, 8 MiB first."""
    sizes = [m * MIB for m in range(max(1, -(-size // (count * MIB))), size // MIB + 2)
             if -(-size // (m * MIB)) == count]
    return sorted(sizes, key=lambda part: (part != 8 * MIB, part))


def _md5_of_parts(path: Path, part_bytes: int) -> list[str]:
    md5s: list[str] = []
    with open(path, "rb") as file:
        while True:
            left, part = part_bytes, hashlib.md5()
            while left and (chunk := file.read(min(READ_BYTES, left))):
                part.update(chunk)
                left -= len(chunk)
            if left == part_bytes:
                return md5s or [hashlib.md5(b"").hexdigest()]
            md5s.append(part.hexdigest())


def _whole_md5(path: Path) -> str:
    whole = hashlib.md5()
    with open(path, "rb") as file:
        while chunk := file.read(READ_BYTES):
            whole.update(chunk)
    return whole.hexdigest()
