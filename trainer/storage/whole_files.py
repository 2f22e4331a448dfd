"""Whether one file a library wrote is whole, from its own format, without loading it: a torch.save
zip archive (its central directory comes last) or a safetensors file (its header gives the size)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from .regular_files import open_regular

TORCH_SUFFIXES = (".bin", ".pkl", ".pt", ".pth")  # what torch.save writes for Accelerate and torch
_MAX_SAFETENSORS_HEADER = 100 * 2**20  # safetensors' own limit on its JSON header


def zip_readable(path: Path) -> bool:
    """torch.save writes a zip archive: its central directory, at the very end, comes last."""
    try:
        with open_regular(path) as stream, zipfile.ZipFile(stream) as archive:
            return bool(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def safetensors_whole(path: Path) -> bool:
    """8 bytes of header length, the JSON header, then the tensors: the last tensor's end is the size."""
    try:
        with open_regular(path) as stream:
            header_length = int.from_bytes(stream.read(8), "little")
            if not 0 < header_length <= _MAX_SAFETENSORS_HEADER:
                return False
            header = json.loads(stream.read(header_length))
        end = max((int(tensor["data_offsets"][1]) for name, tensor in header.items() if name != "__metadata__"),
                  default=0)
        return path.stat().st_size == 8 + header_length + end
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return False


def file_whole(path: Path) -> bool:
    """A torch archive or safetensors file must prove it is whole; any other file is taken as it is."""
    if path.suffix in TORCH_SUFFIXES:
        return zip_readable(path)
    if path.suffix == ".safetensors":
        return safetensors_whole(path)
    return True
