"""A checkpoint restored from S3: its manifest read, its files downloaded (or linked from copies this
disk already holds, held_files.py) into a staging folder, every block checked against the manifest,
then renamed into place. Damage found is the checkpoint's own, unless S3 failed to answer."""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from .checkpoint_files import BadManifest, entry_name, safe_relative
from .checksums import digest_files
from .held_files import copies_of, link_held
from .job_keys import MANIFEST
from .job_objects import DamagedRecord, JobObjects, RemoteStoreError
from .key_names import local_name

log = logging.getLogger(__name__)

# Writing the restore failed for the instance's disk: a full disk, a quota, read-only, no permission.
LOCAL_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO}


def restore_step(objects: JobObjects, prefix: str, step: int, dest_dir: Path, damaged: set[int]) -> Path | None:
    """Step `step` (its objects under `prefix`) into dest_dir, verified against its manifest; None when
    it is damaged (added to `damaged` when the damage is proven, not S3 failing to answer)."""
    staging = dest_dir / f".step-{step:08d}.{os.getpid()}.tmp"
    proven = True  # a problem found is the checkpoint's own, unless S3 failed to answer
    try:
        manifest = objects.get_json(prefix + MANIFEST, absolute=True)
        if manifest is None:
            log.warning("checkpoint step %d has no manifest (incomplete upload); trying an older one",
                        step)
            damaged.add(step)
            return None
        final = dest_dir / entry_name(manifest["name"])
        _remove(staging)
        targets = _download_all(objects, prefix, manifest, staging, copies_of(dest_dir, final.name))
        problem = _verify(manifest, targets)
    except OSError as error:
        _remove(staging)
        if error.errno in LOCAL_DISK_ERRORS:  # this disk, not the checkpoint: never fall back past it
            raise RemoteStoreError(f"cannot restore checkpoint step {step} into {dest_dir}: {error}") from error
        problem = f"{type(error).__name__}: {error}"
    except (DamagedRecord, BadManifest, KeyError, TypeError, ValueError) as error:
        problem = f"{type(error).__name__}: {error}"
    except RemoteStoreError as error:  # S3 after its retries: says nothing about the checkpoint
        problem, proven = f"{type(error).__name__}: {error}", False
    if problem and proven:
        damaged.add(step)
    if problem:
        log.warning("checkpoint step %d is damaged (%s); trying an older one", step, problem)
        _remove(staging)
        return None
    _remove(final)
    staging.rename(final)
    log.info("restored step %d into %s", step, final)
    return final

def _download_all(objects: JobObjects, prefix: str, manifest: dict[str, Any], staging: Path,
                  copies: list[Path]) -> dict[str, Path]:
    """Every file of the manifest into `staging`: those a `copies` folder holds unchanged linked from
    there (held_files.py), the rest downloaded in parallel."""
    held: set[str] = set()
    if manifest["kind"] == "file":
        (name,) = manifest["files"]
        targets = {name: staging}
    else:  # each file under the name it had: the key may be its escaped form (key_names.py)
        relatives = {key: safe_relative(local_name(key, entry)) for key, entry in manifest["files"].items()}
        named = {key: (staging / relative, relative, manifest["files"][key]) for key, relative in relatives.items()}
        targets = {key: target for key, (target, _, _) in named.items()}
        held = link_held(copies, named, int(manifest["block_bytes"]))
    for target in targets.values():
        target.parent.mkdir(parents=True, exist_ok=True)
    fetched = {name: path for name, path in targets.items() if name not in held}
    total = sum(int(manifest["files"][name]["size"]) for name in fetched)
    objects.transfer_all(((prefix + name, str(path)) for name, path in fetched.items()), total, download=True)
    if held:
        log.info("restore of step %s: %d of %d files already on this disk, not downloaded", manifest.get("step"),
                 len(held), len(targets))
    return targets

def _verify(manifest: dict[str, Any], targets: dict[str, Path]) -> str:
    """'' if every file has the manifest's size and block SHA-256s, else what is wrong."""
    for name, expected in manifest["files"].items():
        size = targets[name].stat().st_size
        if size != expected["size"]:
            return f"{name}: {size} bytes, manifest says {expected['size']}"
    block_bytes = int(manifest["block_bytes"])
    found = digest_files(targets, block_bytes)
    for name, expected in manifest["files"].items():
        for index, (got, want) in enumerate(zip(found[name], expected["sha256_blocks"], strict=False)):
            if got != want:
                start = index * block_bytes
                return f"{name}: sha256 mismatch in bytes {start}..{start + block_bytes}"
        if len(found[name]) != len(expected["sha256_blocks"]):
            return f"{name}: manifest lists {len(expected['sha256_blocks'])} blocks"
    return ""


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
