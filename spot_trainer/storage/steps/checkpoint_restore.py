"""A checkpoint restored from S3: its manifest read, its files downloaded (or linked from copies this
disk already holds, held_files.py) into a staging folder, every block checked against the manifest,
then renamed into place. Damage found is the checkpoint's own, unless S3 failed to answer.

On several nodes a restore for a round's ranks (shards.NodeRanks) fetches of a sharded step only what
those ranks read (resharded.node_reads): `.metadata`, the files rank 0 alone writes, and at the world size
that saved it the ranks' own shards whole and of the others the pieces that hold items stored whole; at
another, the stored chunks its ranks' rows overlap, less the rows of each they do not use (checked against
the chunk's archive once fetched, chunk_archive.py). The rest of those files is left a hole (each file keeps
its size, so DCP's offsets hold). Such a restore is named in a record beside it (PART_RECORD), with where in
S3 each file is: the next round reads it (a copy in part is never taken for the whole step), and so does a
rank's read of what its node left out (integrations/missing_reads.py)."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ...integrations.byte_ranges import Range, merged
from ...integrations.checkpoint_names import RESTORED_PART
from ..checkpoint_versions import is_version
from ..files.checksums import digest_files
from ..files.held_files import copies_of, link_held
from ..s3.job_keys import MANIFEST
from ..s3.job_objects import DamagedRecord, JobObjects, RemoteStoreError
from ..s3.key_names import local_name
from ..s3.s3client import DEFAULT_CONCURRENCY
from ..saves import chunk_archive, resharded, shards
from .checkpoint_files import BadManifest, entry_name, safe_relative

log = logging.getLogger(__name__)

# Writing the restore failed for the instance's disk: a full disk, a quota, read-only, no permission.
LOCAL_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO}
FILE_SET = "files"  # a manifest's kind for entries restored side by side in CHECKPOINT_DIR (fixed_names.py)
PART_RECORD = RESTORED_PART  # in CHECKPOINT_DIR: the step restored in part, and for which ranks


@dataclass
class Fetch:
    """What a restore fetches of a manifest's files: key → whole, key → pieces, and the keys left out."""

    pieces: dict[str, list[Range]] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # key of each shard → (name in it, size)
    narrowed: dict[str, list[shards.Narrowed]] = field(default_factory=dict)  # chunks fetched but unused rows

    @property
    def in_part(self) -> bool:
        return bool(self.pieces or self.absent)


def restore_step(objects: JobObjects, prefix: str, step: int, dest_dir: Path, damaged: set[int],
                 ranks: shards.NodeRanks | None = None) -> Path | None:
    """Step `step` (its objects under `prefix`) into dest_dir, verified against its manifest; None when
    it is damaged (added to `damaged` when the damage is proven, not S3 failing to answer). With `ranks`,
    of a sharded step only what those ranks read (shards.BEFORE_A_ROUND: none of its shards)."""
    staging = dest_dir / f".step-{step:08d}.{os.getpid()}.tmp"
    proven, file_set = True, False  # a problem found is the checkpoint's own, unless S3 failed to answer
    try:
        manifest = objects.get_json(prefix + MANIFEST, absolute=True)
        if manifest is None:
            log.warning("checkpoint step %d has no manifest (incomplete upload); trying an older one",
                        step)
            damaged.add(step)
            return None
        final = dest_dir / entry_name(manifest["name"])
        _remove(staging)
        fetch = Fetch()
        file_set = manifest["kind"] == FILE_SET
        copies = [] if file_set else copies_of(dest_dir, final.name)
        targets = _download_all(objects, prefix, manifest, staging, copies, ranks, fetch)
        problem = _verify(manifest, targets, fetch)
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
    placed = _put_in_place(staging, final, file_set)
    if is_version(step):
        _written_at(final.parent, placed, step)
    _record_part(dest_dir, step, final.name, ranks, fetch, (objects.bucket, prefix))
    log.info("restored step %d into %s%s", step, final, " (what this node's ranks read)" if fetch.in_part else "")
    return final


def _put_in_place(staging: Path, final: Path, file_set: bool) -> list[str]:
    """The verified restore renamed into place: a set's entries each under its own name beside `final`
    (a fixed-name checkpoint and its companions, as the script left them), else the one entry. The names
    placed."""
    if not file_set:
        _remove(final)
        staging.rename(final)
        return [final.name]
    placed = sorted(entry.name for entry in staging.iterdir())
    for name in placed:
        _remove(final.parent / name)
        (staging / name).rename(final.parent / name)
    staging.rmdir()
    return placed


def _written_at(folder: Path, names: list[str], version: int) -> None:
    """A version is when its files were written: restored, they say so again, or the agent would take them
    for a newer version and send the same bytes up once more."""
    for name in names:
        entry = folder / name
        if name.startswith(".") or entry.is_symlink():
            continue
        files = [entry] if entry.is_file() else [p for p in entry.iterdir() if p.is_file()] if entry.is_dir() else []
        for file in files:
            os.utime(file, (version, version))


def _record_part(dest_dir: Path, step: int, name: str, ranks: shards.NodeRanks | None, fetch: Fetch,
                 source: tuple[str, str]) -> None:
    """The record of a restore in part: the step, the ranks, what was left out, and where in S3 each such file
    is (bucket, step prefix, key → name in the checkpoint and size), so a rank that reads what was left out
    fetches it (integrations/missing_reads.py)."""
    record = dest_dir / PART_RECORD
    if not fetch.in_part:
        record.unlink(missing_ok=True)
        return
    before = restored_in_part(dest_dir) or {}
    held_for = before.get("ranks") if before.get("step") == step else None  # kept: the round before's share
    for_ranks = held_for if ranks in (None, shards.BEFORE_A_ROUND) else [ranks.group_rank, ranks.nodes, ranks.per_node]
    body = {"step": step, "name": name, "ranks": for_ranks,
            "absent": sorted(fetch.absent), "pieces": fetch.pieces,
            "bucket": source[0], "prefix": source[1], "files": fetch.files, "narrowed": fetch.narrowed}
    aside = dest_dir / f"{PART_RECORD}.{os.getpid()}"
    aside.write_text(json.dumps(body))
    os.replace(aside, record)


def restored_in_part(dest_dir: Path) -> dict[str, Any] | None:
    """The record of the step this folder holds in part (its step, name and the ranks it was for), if any."""
    try:
        record = json.loads((dest_dir / PART_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None

def _download_all(objects: JobObjects, prefix: str, manifest: dict[str, Any], staging: Path,
                  copies: list[Path], ranks: shards.NodeRanks | None, fetch: Fetch) -> dict[str, Path]:
    """Every file of the manifest into `staging` (with `ranks`, what they read: `fetch` says what was left
    out): those a `copies` folder holds unchanged linked from there (held_files.py), the rest downloaded
    in parallel."""
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
    if ranks is not None and manifest["kind"] != "file":
        fetched = _share(objects, prefix, manifest, targets, fetched, ranks, fetch)
    total = sum(int(manifest["files"][name]["size"]) for name in fetched)
    objects.transfer_all(((prefix + name, str(path)) for name, path in fetched.items()), total, download=True)
    _fetch_pieces(objects, prefix, manifest, targets, fetch)
    _check_narrowed(objects, prefix, targets, fetch)
    if held:
        log.info("restore of step %s: %d of %d files already on this disk, not downloaded", manifest.get("step"),
                 len(held), len(targets))
    return targets

def _share(objects: JobObjects, prefix: str, manifest: dict[str, Any], targets: dict[str, Path],
           fetched: dict[str, Path], ranks: shards.NodeRanks, fetch: Fetch) -> dict[str, Path]:
    """Of `fetched` (key → target), what the node's ranks read: each DCP folder's `.metadata` is fetched
    first, and read (shards.node_share); `fetch` gets the pieces and the files left out."""
    names = {key: str(safe_relative(local_name(key, entry))) for key, entry in manifest["files"].items()}
    keys_of = {name: key for key, name in names.items()}
    folders = {name.rpartition("/")[0] for name in names.values() if name.rpartition("/")[2] == shards.METADATA}
    metadata = {keys_of[shards.metadata_name(folder)]: folder for folder in folders}
    first = {key: path for key, path in fetched.items() if key in metadata}
    objects.transfer_all(((prefix + key, str(path)) for key, path in first.items()),
                         sum(int(manifest["files"][key]["size"]) for key in first), download=True)
    whys = []
    for key, folder in metadata.items():
        inside = {name.removeprefix(f"{folder}/") if folder else name: key for key, name in names.items()
                  if name.rpartition("/")[0] == folder and shards.rank_of(name) is not None}
        share = resharded.node_reads(targets[key].read_bytes(), set(inside), ranks)
        whys += [f"{shards.metadata_name(folder)}: {share.why}"] if share.why else []
        for name, shard_key in inside.items():
            fetch.files[shard_key] = (names[shard_key], int(manifest["files"][shard_key]["size"]))
            if shard_key not in fetched:  # this disk holds it whole, linked already
                continue
            if name in share.pieces:
                fetch.pieces[shard_key] = share.pieces[name]
                if name in share.narrowed:
                    fetch.narrowed[shard_key] = share.narrowed[name]
            elif name not in share.whole:
                fetch.absent.add(shard_key)
    if whys:
        log.info("restoring all of step %s for this node's ranks (%d to %d of %d): %s", manifest.get("step"),
                 ranks.ranks.start, ranks.ranks.stop - 1, ranks.world, "; ".join(whys))
    return {key: path for key, path in fetched.items()
            if key not in first and key not in fetch.pieces and key not in fetch.absent}


def _fetch_pieces(objects: JobObjects, prefix: str, manifest: dict[str, Any], targets: dict[str, Path],
                  fetch: Fetch) -> None:
    """Each file of `fetch.pieces` at its full size, holding only its pieces (ranged GETs, in parallel)."""
    for key in fetch.pieces:
        with open(targets[key], "wb") as stream:
            stream.truncate(int(manifest["files"][key]["size"]))
    with ThreadPoolExecutor(max_workers=DEFAULT_CONCURRENCY) as pool:
        for done in [pool.submit(_fetch_range, objects, prefix + key, targets[key], offset, length)
                     for key, pieces in fetch.pieces.items() for offset, length in pieces]:
            done.result()


def _fetch_range(objects: JobObjects, key: str, target: Path, offset: int, length: int) -> None:
    try:
        body = objects.s3.get_object(Bucket=objects.bucket, Key=key,
                                     Range=f"bytes={offset}-{offset + length - 1}")["Body"].read()
    except (ClientError, BotoCoreError) as error:
        raise RemoteStoreError(f"s3://{objects.bucket}/{key}: {error}") from error
    if len(body) != length:
        raise ValueError(f"{key}: bytes {offset}..{offset + length}: {len(body)} bytes came back")
    with open(target, "r+b") as stream:
        stream.seek(offset)
        stream.write(body)


def _check_narrowed(objects: JobObjects, prefix: str, targets: dict[str, Path], fetch: Fetch) -> None:
    """Each chunk fetched without rows its ranks do not use holds its storage where it was guessed to start
    (chunk_archive.py); one that does not is fetched whole, in one line."""
    for key, chunks in fetch.narrowed.items():
        kept = []
        with open(targets[key], "rb") as stream:
            for chunk in chunks:
                offset, length, start, rows, row_bytes, _ = chunk
                stream.seek(offset)
                head = stream.read(start - offset)
                stream.seek(start + rows * row_bytes)
                if chunk_archive.storage_starts(head, start - offset) and \
                        chunk_archive.storage_ends(stream.read(24), rows * row_bytes):
                    kept.append(chunk)
                    continue
                log.info("%s: the stored chunk at bytes %d..%d is not laid out as guessed: fetched whole", key,
                         offset, offset + length)
                _fetch_range(objects, prefix + key, targets[key], offset, length)
                fetch.pieces[key] = merged([*fetch.pieces[key], (offset, length)])  # what it holds
        fetch.narrowed[key] = kept
    fetch.narrowed = {key: chunks for key, chunks in fetch.narrowed.items() if chunks}


def _verify(manifest: dict[str, Any], targets: dict[str, Path], fetch: Fetch) -> str:
    """'' if every file has the manifest's size and block SHA-256s (a file fetched in pieces: its size),
    else what is wrong."""
    for name, expected in manifest["files"].items():
        if name in fetch.absent:
            continue
        size = targets[name].stat().st_size
        if size != expected["size"]:
            return f"{name}: {size} bytes, manifest says {expected['size']}"
    block_bytes = int(manifest["block_bytes"])
    targets = {name: path for name, path in targets.items() if name not in fetch.absent and name not in fetch.pieces}
    found = digest_files(targets, block_bytes)
    for name, expected in manifest["files"].items():
        if name not in targets:
            continue
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
