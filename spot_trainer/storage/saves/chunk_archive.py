"""Where a tensor's bytes sit inside one stored chunk of a DCP save, so a node can fetch only the rows its ranks use.

DCP's file writer stores each tensor chunk as `torch.save(tensor)` (torch 2.13 `_write_item`): a zip archive
whose records are written streaming (flag bit 3: the sizes follow each record's data in a data descriptor,
`PK\\x07\\x08`, crc-32, then the sizes), `<archive>/data.pkl` first, then the tensor's storage as
`<archive>/data/0`, uncompressed and 64-byte aligned, then small records and the central directory. DCP's
reader `torch.load`s the chunk and narrows it to the rows its rank holds (`narrow_tensor_by_index`); torch's
zip reader does not check the crc-32, so rows a rank does not use may be a hole. Which byte the storage starts
at is guessed (ARCHIVE_HEAD: the pickle of one tensor, padded, in every archive measured) and checked once
fetched: the local header naming `data/0` must end exactly there, and its data descriptor must follow exactly
the storage's size later. A chunk whose check fails is fetched whole.
"""

from __future__ import annotations

import struct

ARCHIVE_HEAD = 704  # bytes before the storage of a tensor's torch.save archive (torch 2.x, measured)
LOCAL_HEADER = b"PK\x03\x04"
DESCRIPTOR = b"PK\x07\x08"
STORAGE_RECORD = b"/data/0"
# A dtype's name, as a `.metadata` pickles it (torch.float32 → `float32`), → bytes per element.
ELEMENT_BYTES = {"float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
                 "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1, "uint8": 1,
                 "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "complex64": 8, "complex128": 16}


def storage_starts(head: bytes, start: int) -> bool:
    """Whether the storage record's data begins at `start` in `head` (the chunk's first bytes): the last local
    header before it names `.../data/0` and its name and extra field end there."""
    at = head.rfind(LOCAL_HEADER, 0, start)
    if at < 0 or at + 30 > start:
        return False
    name_length, extra_length = struct.unpack("<HH", head[at + 26:at + 30])
    name = head[at + 30:at + 30 + name_length]
    return name.endswith(STORAGE_RECORD) and at + 30 + name_length + extra_length == start


def storage_ends(after: bytes, size: int) -> bool:
    """Whether `after` (the bytes right after the storage's guessed end) is its data descriptor, stating
    `size` bytes (4-byte sizes, or 8-byte in a zip64 archive)."""
    if not after.startswith(DESCRIPTOR) or len(after) < 16:
        return False
    small = struct.unpack("<II", after[8:16])
    large = struct.unpack("<QQ", after[8:24]) if len(after) >= 24 else (-1, -1)
    return small == (size, size) or large == (size, size)
