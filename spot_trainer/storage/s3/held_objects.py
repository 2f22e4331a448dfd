"""What S3 holds of an object, against what was sent: its size and the SHA-256 S3 keeps of it.

Uploads ask for ChecksumAlgorithm SHA256: botocore sends the SHA-256 of each part (or of a single object's
body) it sends, S3 refuses a part whose bytes do not match it (BadDigest), and keeps the object's
checksum: of a single PutObject the SHA-256 of its body, of a multipart upload the SHA-256 of its parts'
SHA-256s, answered with `-<parts>` after it. A HEAD with ChecksumMode reads it back; the upload's own
reads (files/hashed_reads.py) say what it must be, so a step is published only once S3 holds those bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..files.hashed_reads import HashedRead


@dataclass(frozen=True)
class Held:
    size: int
    sha256: str  # base64, without the `-<parts>` of a multipart upload ('' when S3 keeps none)


@dataclass(frozen=True)
class Sent:
    """One file as it went up: its bytes, the SHA-256 of each manifest block, the SHA-256 S3 holds."""

    size: int
    blocks: list[str]
    sha256: str


def held(s3: Any, bucket: str, key: str) -> Held:
    """The object's size and SHA-256 (one HEAD); ClientError and BotoCoreError pass through."""
    answer = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    return Held(int(answer["ContentLength"]), str(answer.get("ChecksumSHA256", "")).split("-")[0])


def as_sent(read: HashedRead, found: Held) -> Sent | str:
    """The file as sent when S3 holds what `read` handed out, else what differs."""
    if found.size != read.sent:
        return f"S3 holds {found.size} bytes of the {read.sent} sent"
    if not found.sha256:
        return "S3 keeps no SHA-256 of it, so what it holds cannot be checked"
    if found.sha256 not in read.s3_checksums():
        return "S3 holds other bytes than were sent (its SHA-256 differs)"
    return Sent(read.sent, read.blocks(), found.sha256)


def differs(entry: dict[str, Any], found: Held) -> str:
    """What differs between a manifest's entry and the object S3 holds ('' when nothing does). An entry
    from before S3's SHA-256 was recorded is checked by its size alone."""
    if found.size != int(entry["size"]):
        return f"S3 holds {found.size} bytes of its {entry['size']}"
    if (recorded := entry.get("sha256_s3")) and found.sha256 != recorded:
        return "S3 holds other bytes than its manifest describes (its SHA-256 differs)"
    return ""
