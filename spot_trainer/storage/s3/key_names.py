"""How a file's name inside a checkpoint becomes the last part of its S3 key, and back.

A file system name is bytes; an S3 key is UTF-8 of at most 1024 bytes. Tools that write raw bytes
leave names that are not UTF-8 (`b'w\\xff.bin'`), and such a name must not cost the checkpoint it is
in. The escape, one for every name:

    every byte that is not part of valid UTF-8, every ASCII control byte (0x00-0x1F, 0x7F) and `%`
    itself become `%XX` (two upper-case hex digits); everything else is kept as it is

so a name with none of these keeps its key (what earlier checkpoints hold), two names never share a
key, and `urllib.parse.unquote_to_bytes(key)` gives the name's bytes back. The manifest also keeps
the original bytes of each name the escape changed (`path_b64`), and a restore writes exactly those.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from typing import Any

KEY_LIMIT_BYTES = 1024  # S3 refuses longer keys (KeyTooLongError)
ORIGINAL_BYTES = "path_b64"  # a manifest entry's field: base64 of the name's bytes, where the key differs
_INVALID = range(0xDC80, 0xDD00)  # what surrogateescape makes of a byte that is not UTF-8


def key_name(name: str) -> str:
    """`name` (a relative POSIX path as the file system gave it) in the escape above."""
    text = os.fsencode(name).decode("utf-8", errors="surrogateescape")
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    code = ord(char)
    if code in _INVALID:
        return f"%{code - 0xDC00:02X}"
    if code < 0x20 or code == 0x7F or char == "%":
        return f"%{code:02X}"
    return char


def too_long(key: str) -> bool:
    return len(key.encode("utf-8")) > KEY_LIMIT_BYTES


def manifest_fields(name: str, key: str) -> dict[str, str]:
    """What a manifest entry adds to keep `name` losslessly: nothing when the key is the name."""
    if key == name:
        return {}
    return {ORIGINAL_BYTES: base64.b64encode(os.fsencode(name)).decode("ascii")}


def local_name(key: str, entry: Mapping[str, Any]) -> str:
    """The relative path a restore writes for the manifest entry stored under `key`: the original bytes
    where the manifest kept them (as the file system spells bytes), else the key itself (older
    manifests, and every name the escape leaves alone). ValueError when the bytes are not base64."""
    original = entry.get(ORIGINAL_BYTES)
    if original is None:
        return key
    if not isinstance(original, str):
        raise ValueError(f"{ORIGINAL_BYTES} of {key!r} is not text")
    try:
        return os.fsdecode(base64.b64decode(original, validate=True))
    except binascii.Error as error:
        raise ValueError(f"{ORIGINAL_BYTES} of {key!r} is not base64 ({error})") from None


def shown(name: str) -> str:
    """A name for a log line: bytes that are not UTF-8 as \\xNN."""
    return os.fsencode(name).decode("utf-8", errors="backslashreplace")
