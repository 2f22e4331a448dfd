"""Whether one file is whole, from its own format, without loading it, whatever it is called.

A format proves it when its structure records its own extent, so a file cut short or still being
written fails the check (S3 user docs aside, these are the formats' own specifications):

    torch archive, Keras `.keras`   a zip: the end-of-central-directory record comes last, and every
                                    member's local header and data must lie before the central
                                    directory (torch.save >= 1.6 writes a zip; keras 3 saves a zip)
    safetensors                     8 bytes of little-endian header length N, a JSON header of N bytes,
                                    then the tensors: the largest `data_offsets` end is the rest of the file
    HDF5 (Keras `.h5`/`.hdf5`)      the superblock records the end-of-file address; the file's size must
                                    match it, and a version 3 superblock must not say "open for writing"

Anything else (a legacy pickle, numpy's `.npy`, an unknown format) cannot prove it: `proof` says None.
The format is read from the content, not the name: a `.pt` file may be a legacy pickle.
"""

from __future__ import annotations

import json
import struct
import zipfile
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from .regular_files import open_regular

SETTLE_SECONDS = 2.0  # how long a whole save must lie unchanged before it goes up: the writer may reopen it
TORCH_SUFFIXES = (".bin", ".pkl", ".pt", ".pth")  # what torch.save writes for Accelerate and torch
_MAX_SAFETENSORS_HEADER = 100 * 2**20  # safetensors' own limit on its JSON header
_ZIP_LOCAL = b"PK\x03\x04"
_ZIP_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., file name length, extra field length
_ZIP_DESCRIPTOR = 12  # crc, sizes after the data when flag bit 3 is set (16 with its optional signature)
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_HDF5_USER_BLOCKS = (0, 512, 1024, 2048, 4096, 8192)  # where the superblock may start (spec: 0 or 512·2^n)
_HDF5_OPEN_FOR_WRITING = 0x01  # version 3's file consistency flags


class Format(StrEnum):
    ZIP = "zip"
    SAFETENSORS = "safetensors"
    HDF5 = "hdf5"


def format_of(path: Path) -> Format | None:
    """Which self-describing format `path` holds, by its first bytes; None for any other (or unreadable)."""
    try:
        with open_regular(path) as stream:
            head = stream.read(16)
            if head.startswith(_ZIP_LOCAL):
                return Format.ZIP
            if head.startswith(_HDF5_SIGNATURE) or _hdf5_superblock_at(stream, path.stat().st_size) is not None:
                return Format.HDF5
    except (OSError, ValueError):
        return None
    length = int.from_bytes(head[:8], "little") if len(head) >= 9 else 0
    return Format.SAFETENSORS if 0 < length <= _MAX_SAFETENSORS_HEADER and head[8:9] == b"{" else None


def proof(path: Path) -> bool | None:
    """True when the file's format proves it whole, False when it proves it is not, None when it cannot."""
    found = format_of(path)
    if found is None:
        return None
    return _CHECKS[found](path)


def format_name(path: Path, found: Format) -> str:
    """The format in a user's words: 'a torch archive', 'a Keras archive', 'a safetensors file', ..."""
    if found is Format.ZIP:
        if path.suffix == ".keras":
            return "a Keras archive"
        return "a torch archive" if path.suffix in (*TORCH_SUFFIXES, ".ckpt", ".tar") else "a zip archive"
    return "a safetensors file" if found is Format.SAFETENSORS else "an HDF5 file"


def zip_whole(path: Path) -> bool:
    """The central directory reads, and every member's header and data lie before it."""
    try:
        with open_regular(path) as stream, zipfile.ZipFile(stream) as archive:
            members = archive.infolist()
            directory_starts = int(getattr(archive, "start_dir", 0))
            return bool(members) and all(_member_fits(stream, member, directory_starts) for member in members)
    except (zipfile.BadZipFile, OSError, ValueError, struct.error, EOFError):
        return False


def zip_crcs_match(path: Path) -> bool:
    """Every member's bytes match the CRC-32 its zip records: a copy read while its writer rewrote the file
    in place (old bytes before the copy's position, new ones after it) fails here, though its structure
    may read whole."""
    try:
        with open_regular(path) as stream, zipfile.ZipFile(stream) as archive:
            return archive.testzip() is None
    except (zipfile.BadZipFile, OSError, ValueError, struct.error, EOFError, RuntimeError, NotImplementedError):
        return False


def _member_fits(stream: IO[bytes], member: zipfile.ZipInfo, directory_starts: int) -> bool:
    stream.seek(member.header_offset)
    signature, name_length, extra_length = _ZIP_LOCAL_HEADER.unpack(stream.read(_ZIP_LOCAL_HEADER.size))
    descriptor = _ZIP_DESCRIPTOR if member.flag_bits & 0x08 else 0
    end = member.header_offset + _ZIP_LOCAL_HEADER.size + name_length + extra_length + member.compress_size
    return bool(signature == _ZIP_LOCAL and end + descriptor <= directory_starts)


def safetensors_whole(path: Path) -> bool:
    """8 bytes of header length, the JSON header, then the tensors: the last tensor's end is the size."""
    try:
        with open_regular(path) as stream:
            header_length = int.from_bytes(stream.read(8), "little")
            if not 0 < header_length <= _MAX_SAFETENSORS_HEADER:
                return False
            header = json.loads(stream.read(header_length))
        ends = [_tensor_end(tensor) for name, tensor in header.items() if name != "__metadata__"]
        return path.stat().st_size == 8 + header_length + max(ends, default=0)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return False


def _tensor_end(tensor: Any) -> int:
    begin, end = (int(offset) for offset in tensor["data_offsets"])
    if not 0 <= begin <= end:
        raise ValueError("a tensor's offsets run backwards")
    return end


def hdf5_whole(path: Path) -> bool:
    """The superblock's end-of-file address (relative to its base address) is the file's size."""
    try:
        size = path.stat().st_size
        with open_regular(path) as stream:
            found = _hdf5_superblock_at(stream, size)
            if found is None:
                return False
            base, end_of_file, writing = _hdf5_end(stream, found)
        return not writing and end_of_file > 0 and size in (end_of_file, base + end_of_file)
    except (OSError, ValueError, struct.error):
        return False


def _hdf5_superblock_at(stream: IO[bytes], size: int) -> int | None:
    for offset in _HDF5_USER_BLOCKS:
        if offset + len(_HDF5_SIGNATURE) > size:
            return None
        stream.seek(offset)
        if stream.read(len(_HDF5_SIGNATURE)) == _HDF5_SIGNATURE:
            return offset
    return None


def _hdf5_end(stream: IO[bytes], start: int) -> tuple[int, int, bool]:
    """(base address, end-of-file address, open for writing) from the superblock at `start` (HDF5 file
    format specification, "Superblock": versions 0 and 1 keep the addresses after 24 or 28 bytes of
    fixed fields, versions 2 and 3 after 12)."""
    stream.seek(start + 8)
    version = stream.read(1)[0]
    if version in (0, 1):
        fixed = stream.read(15)
        offset_size, flags = fixed[4], 0
        stream.seek(start + (24 if version == 0 else 28))
    elif version in (2, 3):
        offset_size, _, flags = stream.read(3)
    else:
        raise ValueError(f"HDF5 superblock version {version}")
    if offset_size not in (2, 4, 8):
        raise ValueError(f"HDF5 offsets of {offset_size} bytes")
    addresses = [int.from_bytes(stream.read(offset_size), "little") for _ in range(3)]
    base, end_of_file = addresses[0], addresses[2]  # base, (free space | extension), end of file
    return base, end_of_file, version == 3 and bool(flags & _HDF5_OPEN_FOR_WRITING)


_CHECKS = {Format.ZIP: zip_whole, Format.SAFETENSORS: safetensors_whole, Format.HDF5: hdf5_whole}


def file_whole(path: Path) -> bool:
    """Inside a library's folder: a torch archive or safetensors file must prove it is whole, by its suffix
    (a `.pt` that is no zip there is a save cut short); any other file is taken as it is."""
    if path.suffix in TORCH_SUFFIXES:
        return zip_whole(path)
    if path.suffix == ".safetensors":
        return safetensors_whole(path)
    return True
