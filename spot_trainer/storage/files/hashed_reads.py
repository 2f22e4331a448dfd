"""A checkpoint file read once, front to back, by its upload: the manifest's block SHA-256s and the SHA-256
that S3 must hold of the object come from the very bytes handed to the upload, never from a second read.
A file rewritten in place between two reads (at the same size, its time put back) would make a checksum
read separately disagree with what went up, and a step would be published that fails its own check.

s3transfer reads a stream that cannot seek in order, in one thread, a part per read (0.19:
UploadNonSeekableInputManager, a whole small object in one read), into memory that each request then
sends, and resends on a retry, unchanged. So the SHA-256 of each read is that of each part S3 receives.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from types import TracebackType

from .checksums import BLOCK_BYTES
from .regular_files import open_regular


class HashedRead:
    """A stream over one regular file (links, FIFOs refused) that hashes what it hands out."""

    def __init__(self, path: Path, block_bytes: int = BLOCK_BYTES) -> None:
        self._file = open_regular(path)
        self.size = os.fstat(self._file.fileno()).st_size  # as opened: what the upload is told to expect
        self.sent = 0  # the bytes handed out so far
        self._block_bytes = block_bytes
        self._blocks: list[str] = []
        self._block = hashlib.sha256()
        self._in_block = 0
        self._pieces: list[bytes] = []  # the SHA-256 of each read that returned bytes: of each part

    # s3transfer's tests of a source: readable, and not seekable, so it is read once and in order.
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, amount: int = -1) -> bytes:
        data = self._read_fully(amount)
        if data:
            self.sent += len(data)
            self._pieces.append(hashlib.sha256(data).digest())
            self._hash_blocks(memoryview(data))
        return data

    def _read_fully(self, amount: int) -> bytes:
        """`amount` bytes (all that is left when negative), fewer only at the end of the file."""
        pieces: list[bytes] = []
        wanted = amount if amount >= 0 else None
        while wanted is None or wanted > 0:
            piece = self._file.read(wanted if wanted is not None else 1 << 22)
            if not piece:
                break
            pieces.append(piece)
            wanted = None if wanted is None else wanted - len(piece)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _hash_blocks(self, data: memoryview) -> None:
        while data:
            room = self._block_bytes - self._in_block
            self._block.update(data[:room])
            self._in_block += min(room, len(data))
            data = data[room:]
            if self._in_block == self._block_bytes:
                self._blocks.append(self._block.hexdigest())
                self._block, self._in_block = hashlib.sha256(), 0

    def blocks(self) -> list[str]:
        """The SHA-256 of each block of what was read, as checksums.file_blocks gives it of a file: an
        empty file has one empty block, and a file of whole blocks no empty last one."""
        last = [self._block.hexdigest()] if self._in_block or not self._blocks else []
        return [*self._blocks, *last]

    def s3_checksums(self) -> set[str]:
        """The base64 ChecksumSHA256 S3 may hold of what was read (without its `-N` part count): of a
        single PutObject, the SHA-256 of the body; of a multipart upload, the SHA-256 of its parts'."""
        composite = base64.b64encode(hashlib.sha256(b"".join(self._pieces)).digest()).decode()
        whole = [base64.b64encode(piece).decode() for piece in self._pieces if len(self._pieces) == 1]
        return {composite, *whole}  # of an empty file: the SHA-256 of nothing, as the composite of no parts

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> HashedRead:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
