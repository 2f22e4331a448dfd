"""Files a restore need not download: this disk already holds them, byte for byte.

On several nodes a round resumes a step whose shards were written across them: each node's disk holds
its own ranks' shards of that step (set aside as `.unverified-<name>` or `.incomplete-<name>` when the
round began, or still under the checkpoint's name). A file of the same relative name, size and block
SHA-256s as the manifest lists is linked into the restore instead of fetched again; the restore's own
verification reads it like any downloaded file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .checksums import digest_files
from .regular_files import is_regular

SET_ASIDE_PREFIXES = (".unverified-", ".incomplete-")  # layouts.py's, where earlier copies of a step go


def copies_of(dest_dir: Path, name: str) -> list[Path]:
    """Where this disk may hold an earlier copy of the checkpoint `name`."""
    return [dest_dir / name, *(dest_dir / f"{prefix}{name}" for prefix in SET_ASIDE_PREFIXES)]


def link_held(copies: list[Path], targets: Mapping[str, tuple[Path, str, Mapping[str, Any]]],
              block_bytes: int) -> set[str]:
    """For key → (target, relative name, manifest entry): put each file a copy holds unchanged at its target;
    the keys so placed."""
    found: dict[str, Path] = {}
    for key, (_, relative, entry) in targets.items():
        for copy in copies:
            held = copy / relative
            if is_regular(held) and held.stat().st_size == int(entry["size"]):
                found[key] = held
                break
    if not found:
        return set()
    try:
        digests = digest_files(found, block_bytes)
    except OSError:  # a copy removed while it was read: everything is downloaded
        return set()
    placed = set()
    for key, held in found.items():
        if digests[key] != list(targets[key][2]["sha256_blocks"]):
            continue
        target = targets[key][0]
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            _place(held, target)
        except OSError:  # gone meanwhile: downloaded like the rest
            continue
        placed.add(key)
    return placed


def _place(held: Path, target: Path) -> None:
    try:
        os.link(held, target)
    except FileNotFoundError:
        raise
    except OSError:  # no hard links here: a copy still saves the download
        shutil.copyfile(held, target)
