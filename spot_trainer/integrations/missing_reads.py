"""A rank never reads a hole: what its node did not fetch of a step, it fetches before DCP reads it.

A node restores of a sharded step what its ranks are expected to read (storage/steps/checkpoint_restore.py):
files of their full size holding only those pieces, others left out, all named in CHECKPOINT_DIR's
RESTORED_PART record with where each is in S3. A sparse file reads zeros in its holes, never an error, so a load
plan other than the one expected (another sharding) would load zeros in silence. A file deleted since is
read as left out. So before DCP's file reader reads (`FileSystemReader.read_data`, which every `dcp.load`
goes through), the bytes each read uses of its stored chunk (all of it, or of a chunk fetched without rows
its node does not use, the archive's head, tail and the rows the read keeps) are looked up in the record:
what the node lacks is fetched from S3 first (one ranged GET per run of touching chunks), said in one line, and the
load goes on. A fetch that fails ends the load with a line naming the file: never zeros.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from .byte_ranges import Range, merged
from .checkpoint_names import RESTORED_PART

MODULE = "torch.distributed.checkpoint.filesystem"


def fetch_before_reading(module: ModuleType) -> None:
    reader = module.FileSystemReader
    read_data = reader.read_data

    def reading(self: Any, plan: Any, planner: Any) -> Any:
        record = _record()
        if record is not None:
            fetch_missing(Path(str(self.path)), [(self.storage_data[item.storage_index], item) for item in plan.items],
                          record)
        return read_data(self, plan, planner)

    reading.__wrapped__ = read_data  # type: ignore[attr-defined]
    reader.read_data = reading


def _record() -> dict[str, Any] | None:
    directory = os.environ.get("CHECKPOINT_DIR")
    try:
        record = json.loads((Path(directory) / RESTORED_PART).read_text()) if directory else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("files"), dict) else None


def fetch_missing(folder: Path, reads: list[tuple[Any, Any]], record: dict[str, Any]) -> list[tuple[str, Range]]:
    """What each read of `reads` (DCP's _StorageInfo of a stored chunk, and the ReadItem that reads it) in `folder`
    uses of its chunk and the restore in `record` left out, fetched into its file; the (key, range) fetched."""
    root = Path(os.environ["CHECKPOINT_DIR"]) / str(record.get("name"))
    try:
        inside = folder.resolve().relative_to(root.resolve())
    except ValueError:  # another checkpoint than the one restored in part
        return []
    keys = {str(name): (key, int(size)) for key, (name, size) in record["files"].items()}
    narrowed = {key: {(chunk[0], chunk[1]): chunk for chunk in chunks}
                for key, chunks in record.get("narrowed", {}).items()}
    holding: dict[str, list[Range]] = {}
    wanted: dict[str, list[Range]] = {}
    for info, item in reads:
        name = (inside / info.relative_path).as_posix()
        if name not in keys:  # not a shard of the step restored in part
            continue
        key, size = keys[name]
        if name not in holding:
            holding[name] = _held(root / name, key, size, record)
        chunk = narrowed.get(key, {}).get((info.offset, info.length))
        for offset, length in used(info, item, [chunk] if chunk else []):
            if not _within(holding[name], offset, length):
                wanted.setdefault(name, []).append((offset, length))
    fetched = []
    for name, ranges in wanted.items():
        key, size = keys[name]
        for offset, length in merged(ranges):
            _fetch(record, key, root / name, size, offset, length)
            fetched.append((key, (offset, length)))
    return fetched


def used(info: Any, item: Any, narrowed: list[list[int]]) -> list[Range]:
    """The bytes of a stored chunk a read uses: all of it, or, of a chunk the restore fetched without rows its
    ranks do not use (offset, length, storage start, rows, row bytes, row elements), its archive's head and
    tail and the rows the read narrows it to (DCP's `narrow_tensor_by_index` on dim 0, every other dim whole)."""
    for offset, length, start, rows, row_bytes, row_elements in narrowed:
        if (offset, length) != (info.offset, info.length):
            continue
        offsets, lengths = list(item.storage_offsets), list(item.lengths)
        if not lengths or any(offsets[1:]) or math.prod(lengths[1:]) != row_elements:
            break
        return [(offset, start - offset), (start + offsets[0] * row_bytes, lengths[0] * row_bytes),
                (start + rows * row_bytes, offset + length - start - rows * row_bytes)]
    return [(info.offset, info.length)]


def _within(pieces: list[Range], offset: int, length: int) -> bool:
    """Whether one of `pieces` (sorted, apart) holds all of [offset, offset + length)."""
    at = bisect.bisect_right(pieces, (offset, float("inf"))) - 1
    return at >= 0 and offset + length <= pieces[at][0] + pieces[at][1]


def _held(path: Path, key: str, size: int, record: dict[str, Any]) -> list[Range]:
    """The ranges of the file this node holds: none when it was left out or is gone since, its pieces, or all."""
    if key in record.get("absent", []) or not path.is_file():
        return []
    return sorted((int(offset), int(length)) for offset, length in record.get("pieces", {}).get(key, [(0, size)]))


def _fetch(record: dict[str, Any], key: str, path: Path, size: int, offset: int, length: int) -> None:
    import boto3  # only a rank that finds something missing pays for it
    from botocore.config import Config

    source = f"s3://{record.get('bucket')}/{record.get('prefix')}{key}"
    try:
        s3 = boto3.client("s3", config=Config(retries={"mode": "adaptive", "max_attempts": 8},
                                              connect_timeout=5, read_timeout=60))
        body = s3.get_object(Bucket=record["bucket"], Key=f"{record['prefix']}{key}",
                             Range=f"bytes={offset}-{offset + length - 1}")["Body"].read()
    except Exception as error:  # whatever S3 or the network raised: the load must not read a hole
        raise RuntimeError(f"spot-trainer: {path} bytes {offset}..{offset + length} were not restored on this "
                           f"node and could not be fetched from {source}: {error}") from error
    if len(body) != length:
        raise RuntimeError(f"spot-trainer: {path} bytes {offset}..{offset + length}: {len(body)} bytes came "
                           f"back from {source}")
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(descriptor).st_size < size:
            os.ftruncate(descriptor, size)  # the file's full size: DCP's offsets hold
        os.pwrite(descriptor, body, offset)
    finally:
        os.close(descriptor)
    print(f"spot-trainer: rank {os.environ.get('RANK', '0')} reads {path.name} bytes {offset}..{offset + length}, "
          f"which this node had not restored: fetched from S3, the load goes on", file=sys.stderr, flush=True)
