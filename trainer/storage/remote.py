"""The S3 checkpoint store of one job: upload, publish, restore with fallback, retention, events.

The layout under `s3://<bucket>/<job>/` is in job_keys.py: a checkpoint's objects, then its manifest,
then latest.json, which moves only after the manifest exists.

A checkpoint without a manifest is never restored, and `latest.json` is changed with a conditional
write so two publishers can never interleave; the lower step or the lower fencing token loses.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig, create_transfer_manager
from botocore.exceptions import BotoCoreError, ClientError
from s3transfer.subscribers import BaseSubscriber

from . import job_keys as keys
from .checksums import BLOCK_BYTES, digest_files
from .conditional import is_missing, write_if
from .held_files import copies_of, link_held
from .key_names import key_name, local_name, manifest_fields, shown, too_long
from .layouts import Checkpoint, published
from .lease import Lease
from .regular_files import is_regular
from .s3client import transfer_config_for, upload_config_for

log = logging.getLogger(__name__)

MANIFEST = keys.MANIFEST
LEFT_OUT_CAUSE = "file names S3 cannot take"
# Writing the restore failed for the instance's disk: a full disk, a quota, read-only, no permission.
LOCAL_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO}
STEP_PREFIX = re.compile(r"step-(\d+)/$")


class RemoteStoreError(RuntimeError):
    """An S3 operation failed after botocore's retries; the message names the object and the cause."""

    def __init__(self, message: str, *, cause: str = "") -> None:
        super().__init__(message)
        self._cause = cause

    @property
    def cause(self) -> str:
        """What went wrong in a few words, the same for every checkpoint it fails ('' when not known)."""
        origin = self.__cause__
        if self._cause:
            return self._cause
        if isinstance(origin, ClientError):
            return f"S3 answered {origin.response.get('Error', {}).get('Code', 'an error')}"
        if isinstance(origin, BotoCoreError):
            return f"S3 could not be reached ({type(origin).__name__})"
        return ""


class DamagedRecord(RemoteStoreError):
    """A JSON record in S3 that is not what this runtime writes (empty, HTML, a wrong type or field)."""

    def __init__(self, message: str, etag: str | None) -> None:
        super().__init__(message)
        self.etag = etag  # a conditional write may still replace it


class BadManifest(RemoteStoreError):
    """A manifest that names something no checkpoint of ours can be: proven damage, not a bad minute."""


def entry_name(name: object) -> str:
    """A checkpoint's name as its manifest gives it: one plain path component, never `.`, `..` or a
    path, so a restore writes and deletes only inside the checkpoint folder."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise BadManifest(f"manifest names the checkpoint {name!r}, not a plain name")
    return name


def safe_relative(name: str) -> str:
    """A file name inside a checkpoint: relative, with no `.`, `..` or empty part."""
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\0" in name:
        raise BadManifest(f"manifest names a file outside the checkpoint: {name!r}")
    return name


def checkpoint_files(local: Path) -> dict[str, Path]:
    """Relative POSIX name (as the file system gave it) → path of every regular file in a step-N
    checkpoint (a file or a directory). Links are never followed nor uploaded (links_in names them),
    nor are FIFOs, sockets or devices."""
    if local.is_symlink():
        raise RemoteStoreError(f"checkpoint {local} is a link: links are never uploaded",
                               cause="a checkpoint that is a link")
    if local.is_file():
        return {local.name: local}
    if not local.is_dir():
        raise RemoteStoreError(f"checkpoint {local} is neither a file nor a directory")
    found: dict[str, Path] = {}
    for folder, _, names in os.walk(local):  # a link to a folder is listed, never entered
        for name in names:
            if is_regular(path := Path(folder) / name):
                found[path.relative_to(local).as_posix()] = path
    return dict(sorted(found.items()))


def stored_files(files: dict[str, Path], prefix: str) -> tuple[dict[str, tuple[str, Path]], list[str]]:
    """Key name → (name, path) of the files S3 can take under `prefix` (key_names.py's escape), and the
    names it cannot (a key over 1024 bytes), which are left out."""
    stored: dict[str, tuple[str, Path]] = {}
    left_out: list[str] = []
    for name, path in files.items():
        key = key_name(name)
        if too_long(prefix + key):
            left_out.append(name)
        else:
            stored[key] = (name, path)
    return stored, left_out


def _names(names: list[str]) -> str:
    """At most three names for one line, bytes that are not UTF-8 shown as \\xNN."""
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(shown(name) for name in names[:3]) + more


def _version(path: Path) -> tuple[int, int]:
    """Size and modification time: a file rewritten in place changes one of them."""
    found = path.stat()
    return found.st_size, found.st_mtime_ns


class _Chunks(BaseSubscriber):  # type: ignore[misc]  # s3transfer ships no types
    """s3transfer's progress of a download, chunk by chunk, to one callable."""

    def __init__(self, told: Callable[[int], None]) -> None:
        self.told = told

    def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
        self.told(bytes_transferred)


class RemoteStore:
    def __init__(
        self,
        s3: Any,
        bucket: str,
        job: str,
        *,
        keep: int = 3,
        transfer_config: TransferConfig | None = None,
        instance: str | None = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.s3, self.bucket, self.job, self.keep = s3, bucket, job.strip("/"), keep
        # None: size the parts for each transfer from its total bytes (transfer_config_for).
        self.transfer = transfer_config
        self.instance = instance or os.environ.get("SPOT_INSTANCE_ID") or socket.gethostname()
        self.restored_step: int | None = None  # the step the last restore_at_or_below brought back
        self.damaged_steps: set[int] = set()  # steps a restore proved damaged (not merely unreachable)
        # Told which files of a step were left out (names S3 cannot take), beside the log line.
        self.on_left_out: Callable[[int, list[str]], None] = lambda step, names: None
        # Told of each chunk a restore downloads, and the restore's whole download (a progress bar's).
        self.on_download: Callable[[int, int], None] | None = None

    # ---- keys ---------------------------------------------------------------------------------
    def key(self, name: str) -> str:
        return keys.job_key(self.job, name)

    def step_prefix(self, step: int) -> str:
        return self.key(keys.checkpoint_prefix(step))

    # ---- upload and publish -------------------------------------------------------------------
    def upload(self, local: Path, step: int, *, lease: Lease | None = None) -> bool:
        """Upload a committed checkpoint, then publish it unless a newer step or holder already did."""
        local = Path(local)
        prefix = self.step_prefix(step)
        stored, left_out = stored_files(checkpoint_files(local), prefix)
        if not stored:
            raise RemoteStoreError(f"checkpoint {local}: S3 can take none of its files ({_names(left_out)}: keys "
                                   "over 1024 bytes): shorten their paths", cause=LEFT_OUT_CAUSE)
        current, etag = self.latest_record()  # read once: checked here, reused by publish
        latest = int(current["step"]) if current else None
        if latest is not None and latest >= step:
            # Checked before sending any byte too: re-uploading a published step could mix its objects.
            log.warning("not uploading step %d: latest.json already holds step %d", step, latest)
            return False
        if left_out:
            log.warning("checkpoint step %d: left out %s (an S3 key is at most 1024 bytes): shorten their paths; "
                        "the rest is uploaded", step, _names(left_out))
            self.on_left_out(step, [shown(name) for name in left_out])
        started = time.monotonic()
        entries = self.send_files(local, stored, prefix)
        manifest: dict[str, Any] = {
            "step": step,
            "kind": "file" if local.is_file() else "directory",
            "name": local.name,
            "block_bytes": BLOCK_BYTES,
            "files": entries,
            "written_at": time.time(),
            "instance": self.instance,
        }
        if left_out:
            manifest["left_out"] = [shown(name) for name in left_out]
        self._put(prefix + MANIFEST, manifest)
        size = sum(entry["size"] for entry in entries.values())
        log.info("uploaded step %d (%d files, %.1f MB) in %.1fs", step, len(entries), size / 1e6,
                 time.monotonic() - started)
        published = self.publish(step, lease=lease, read=(current, etag))
        if published:
            self.apply_retention(latest=step)
        return published

    def send_files(self, local: Path, stored: dict[str, tuple[str, Path]], prefix: str) -> dict[str, Any]:
        """Upload key → (name, path) under the absolute `prefix`, hashed as the bytes go out and confirmed at
        full size; key → manifest entry (size, block SHA-256s, name). A file rewritten meanwhile fails it."""
        files = {key: path for key, (_, path) in stored.items()}
        try:
            before = {key: _version(path) for key, path in files.items()}
            with ThreadPoolExecutor(max_workers=1) as hasher:
                # Hash while the bytes go out: both mostly wait on I/O and hashlib drops the GIL.
                digests = hasher.submit(digest_files, files)
                total = sum(path.stat().st_size for path in files.values())
                self._transfer_all(((str(path), prefix + key) for key, path in files.items()), total)
                blocks = digests.result()
            sizes = {key: path.stat().st_size for key, path in files.items()}
            if changed := sorted(stored[key][0] for key, path in files.items() if _version(path) != before[key]):
                raise RemoteStoreError(f"checkpoint {local}: {_names(changed)} changed while it was uploaded "
                                       "(rewritten in place, not written then renamed): not published",
                                       cause="files rewritten while they were uploaded")
        except OSError as error:
            raise RemoteStoreError(f"checkpoint {local} changed while uploading: {error}") from error
        self._confirm_sizes(prefix, sizes)
        return {key: {"size": sizes[key], "sha256_blocks": blocks[key], **manifest_fields(name, key)}
                for key, (name, _) in stored.items()}

    def upload_files(self, files: dict[str, Path], prefix: str) -> int:
        """Upload name → file under `<job>/<prefix>`, each confirmed at its full size; the bytes sent."""
        sizes = {name: path.stat().st_size for name, path in files.items()}
        total = sum(sizes.values())
        self._transfer_all(((str(path), self.key(prefix + name)) for name, path in files.items()), total)
        self._confirm_sizes(self.key(prefix), sizes)
        return total

    def publish(self, step: int, *, lease: Lease | None = None, attempts: int = 5,
                read: tuple[dict[str, Any] | None, str | None] | None = None) -> bool:
        """Point latest.json at `step` if it is newer and (with a lease) we still hold the job.

        The write is conditional on the version we read (`read`, when the caller just read it); when
        another writer got in between, read again and decide again, so the newest step wins whatever
        the interleaving.
        """
        for _ in range(attempts):
            current, etag = read or self.latest_record()
            read = None
            refusal = self.publish_refusal(step, current, lease)
            if refusal:
                log.warning("not publishing step %d: %s", step, refusal)
                return False
            record = {"step": step, "key": self.step_prefix(step), "lease_token": lease.token if lease else 0,
                      "written_at": time.time()}
            if self._put_if(keys.LATEST, record, expected=etag):
                return True
        log.warning("not publishing step %d: latest.json kept changing under us", step)
        return False

    @staticmethod
    def publish_refusal(step: int, current: dict[str, Any] | None, lease: Lease | None) -> str:
        """Why `step` must not become latest ('' when it may)."""
        if current is not None and int(current["step"]) >= step:
            return f"latest.json already holds step {current['step']}"
        token = lease.token if lease else 0
        if current is not None and int(current.get("lease_token", 0)) > token:
            return f"a newer lease holder (token {current['lease_token']}) published already"
        if lease is not None and not lease.still_ours():
            return "the job lease is no longer ours"
        return ""

    def latest_step(self) -> int | None:
        latest, _ = self.latest_record()
        return int(latest["step"]) if latest else None

    def latest_record(self) -> tuple[dict[str, Any] | None, str | None]:
        """latest.json as {"step": int, "lease_token": int, ...} and its ETag. A damaged one (empty,
        HTML, a step that is not a number) is named in one line and the newest complete checkpoint S3
        holds stands in for it; its ETag is kept, so the next publish replaces it conditionally."""
        try:
            current, etag = self._get_with_etag(keys.LATEST)
            if current is None:
                return None, None
            step, token = current.get("step"), current.get("lease_token", 0)
            if not (type(step) is int and step >= 0 and type(token) is int):
                raise DamagedRecord(f"s3://{self.bucket}/{self.key(keys.LATEST)}: step {step!r} and lease "
                                    f"token {token!r} are not whole numbers", etag)
        except DamagedRecord as error:
            newest = self.newest_complete_step()
            log.warning("%s; going by the checkpoints S3 holds (newest complete: %s)", error,
                        "none" if newest is None else f"step {newest}")
            return ({"step": newest, "lease_token": 0} if newest is not None else None), error.etag
        return current, etag

    def newest_complete_step(self) -> int | None:
        """The newest step whose manifest exists, from listing S3 (no record trusted)."""
        return next((step for step in reversed(self.remote_steps()) if self._has_manifest(step)), None)

    # ---- restore ------------------------------------------------------------------------------
    def restore(self, dest_dir: Path) -> Path | None:
        """Download the newest valid published checkpoint into dest_dir; older ones if it is damaged."""
        try:
            latest = self.latest_step()
        except RemoteStoreError as error:
            log.warning("latest.json unreadable (%s); considering every checkpoint", error)
            latest = None
        return self.restore_at_or_below(dest_dir, latest)

    def restore_at_or_below(self, dest_dir: Path, latest: int | None) -> Path | None:
        """`restore` for a caller that already read latest.json (None: consider every checkpoint)."""
        self.restored_step = None
        restored = self.restore_checkpoint(dest_dir, latest)
        self.restored_step = restored.step if restored else None
        return restored.path if restored else None

    def restore_checkpoint(self, dest_dir: Path, latest: int | None) -> Checkpoint | None:
        """The newest checkpoint at or below `latest` that restores whole into dest_dir, at its step in S3
        (None: consider every checkpoint)."""
        dest_dir = Path(dest_dir)
        dest_dir.mkdir(parents=True, exist_ok=True)
        candidates = [s for s in self.remote_steps() if latest is None or s <= latest]
        for step in sorted(candidates, reverse=True):
            restored = self._restore_step(step, dest_dir)
            if restored is not None:
                return published(restored, step)
        return None

    def repoint(self, step: int, named: int) -> bool:
        """latest.json names `named`, which could not be restored: point it at `step`, the newest that
        could, unless it changed meanwhile. Later steps then publish, and "in S3" means restorable."""
        current, etag = self.latest_record()
        if current is None or current["step"] != named or etag is None:
            return False
        record = {"step": step, "key": self.step_prefix(step), "lease_token": current.get("lease_token", 0),
                  "written_at": time.time()}
        return self._put_if(keys.LATEST, record, expected=etag)

    def remote_steps(self) -> list[int]:
        """Every step with objects under checkpoints/, complete or not, ascending."""
        paginator = self.s3.get_paginator("list_objects_v2")
        steps: list[int] = []
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key(keys.CHECKPOINTS), Delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                if match := STEP_PREFIX.search(common["Prefix"]):
                    steps.append(int(match.group(1)))
        return sorted(steps)

    def _restore_step(self, step: int, dest_dir: Path) -> Path | None:
        prefix = self.step_prefix(step)
        staging = dest_dir / f".step-{step:08d}.{os.getpid()}.tmp"
        proven = True  # a problem found is the checkpoint's own, unless S3 failed to answer
        try:
            manifest = self.get_json(prefix + MANIFEST, absolute=True)
            if manifest is None:
                log.warning("checkpoint step %d has no manifest (incomplete upload); trying an older one",
                            step)
                self.damaged_steps.add(step)
                return None
            final = dest_dir / entry_name(manifest["name"])
            self._remove(staging)
            targets = self._download_all(prefix, manifest, staging, copies_of(dest_dir, final.name))
            problem = self._verify(manifest, targets)
        except OSError as error:
            self._remove(staging)
            if error.errno in LOCAL_DISK_ERRORS:  # this disk, not the checkpoint: never fall back past it
                raise RemoteStoreError(f"cannot restore checkpoint step {step} into {dest_dir}: {error}") from error
            problem = f"{type(error).__name__}: {error}"
        except (DamagedRecord, BadManifest, KeyError, TypeError, ValueError) as error:
            problem = f"{type(error).__name__}: {error}"
        except RemoteStoreError as error:  # S3 after its retries: says nothing about the checkpoint
            problem, proven = f"{type(error).__name__}: {error}", False
        if problem and proven:
            self.damaged_steps.add(step)
        if problem:
            log.warning("checkpoint step %d is damaged (%s); trying an older one", step, problem)
            self._remove(staging)
            return None
        self._remove(final)
        staging.rename(final)
        log.info("restored step %d into %s", step, final)
        return final

    def _download_all(self, prefix: str, manifest: dict[str, Any], staging: Path,
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
        self._transfer_all(((prefix + name, str(path)) for name, path in fetched.items()), total, download=True)
        if held:
            log.info("restore of step %s: %d of %d files already on this disk, not downloaded", manifest.get("step"),
                     len(held), len(targets))
        return targets

    @staticmethod
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

    # ---- retention ----------------------------------------------------------------------------
    def apply_retention(self, *, latest: int | None = None) -> list[int]:
        """Delete published checkpoints beyond the newest `keep` and abandoned partial uploads.

        Never touches the step latest.json names (`latest`, when the caller just published it), nor
        anything newer (a concurrent upload in progress). The manifest goes first so a half-deleted
        checkpoint is never mistaken for a valid one.
        """
        latest = self.latest_step() if latest is None else latest
        if latest is None:
            return []
        kept, doomed = 1, []
        for step in sorted((s for s in self.remote_steps() if s < latest), reverse=True):
            if kept < self.keep and self._has_manifest(step):
                kept += 1
            else:
                doomed.append(step)
        for step in doomed:
            try:
                self._delete_prefix(self.step_prefix(step))
            except (ClientError, BotoCoreError) as error:
                log.warning("could not delete old checkpoint step %d (%s); will retry next time", step, error)
        return doomed

    def delete_step(self, step: int) -> None:
        """Remove every object of an unpublished step (its manifest first)."""
        try:
            self._delete_prefix(self.step_prefix(step))
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{self.step_prefix(step)}: {error}") from error

    def has_checkpoint(self, step: int) -> bool:
        """The step's manifest is in S3: its checkpoint is complete and restorable."""
        try:
            return self._has_manifest(step)
        except ClientError as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{self.step_prefix(step)}{MANIFEST}: {error}") from error

    def _has_manifest(self, step: int) -> bool:
        try:
            self.s3.head_object(Bucket=self.bucket, Key=self.step_prefix(step) + MANIFEST)
            return True
        except ClientError as error:
            if is_missing(error):
                return False
            raise

    def _delete_prefix(self, prefix: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=prefix + MANIFEST)
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            objects = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if objects:
                self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})

    # ---- small JSON objects and events ----------------------------------------------------------
    def put_json(self, name: str, obj: dict[str, Any]) -> None:
        self._put(name, obj, absolute=False)

    def create_once(self, name: str, obj: dict[str, Any]) -> bool:
        """Write `name` only where it does not exist yet (`IfNoneMatch="*"`): of several nodes racing to
        record the same thing, exactly one gets True."""
        return self._put_if(name, obj, expected=None)

    def get_json(self, name: str, *, absolute: bool = False) -> dict[str, Any] | None:
        return self._get_with_etag(name, absolute=absolute)[0]

    def read_record(self, name: str, *, absolute: bool = False) -> dict[str, Any] | None:
        """A record the job can go on without (its status, an event): a damaged one is named in one line
        and taken as absent. S3 failing after its retries still raises."""
        try:
            return self.get_json(name, absolute=absolute)
        except DamagedRecord as error:
            log.warning("%s: taken as absent", error)
            return None

    def append_event(self, kind: str, **fields: Any) -> None:
        now = time.time()
        event = {"kind": kind, "time": keys.utc_stamp(now), "epoch": now, "instance": self.instance, **fields}
        self._put(keys.event_name(now, self.instance, kind), event, absolute=False)

    def events(self, *kinds: str, since: float | None = None) -> list[dict[str, Any]]:
        """Every event of the job in time order; only those of `kinds`, recorded at or after `since`
        (epoch seconds), when given: chosen by key name, so only those are read."""
        paginator = self.s3.get_paginator("list_objects_v2")
        first = self.key(f"{keys.EVENTS}{keys.utc_stamp(since)}") if since is not None else ""
        endings = tuple(keys.event_kind_suffix(kind) for kind in kinds)
        names = [key for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key(keys.EVENTS))
                 for item in page.get("Contents", []) if (key := item["Key"]) >= first
                 and (not endings or key.endswith(endings))]
        found = (self.read_record(key, absolute=True) for key in sorted(names))
        return [event for event in found if event is not None]

    # ---- S3 plumbing --------------------------------------------------------------------------
    def _transfer_all(self, pairs: Any, total_bytes: int, *, download: bool = False) -> None:
        """Run every (source, destination) transfer concurrently; raise on the first failure."""
        # Downloads: few large ranged GETs; uploads: many small parts (see trainer/s3client.py).
        # total_bytes bounds the largest file, so the part-count limit holds for uploads.
        config = self.transfer or (transfer_config_for(total_bytes) if download else upload_config_for(total_bytes))
        told = self.on_download
        watched = [_Chunks(lambda chunk: told(chunk, total_bytes))] if download and told is not None else None
        with create_transfer_manager(self.s3, config) as manager:
            futures = []
            for source, dest in pairs:
                if download:
                    futures.append((source, manager.download(self.bucket, source, dest, subscribers=watched)))
                else:
                    futures.append((dest, manager.upload(source, self.bucket, dest)))
            for key, future in futures:
                try:
                    future.result()
                except (ClientError, BotoCoreError) as error:
                    raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error

    def _confirm_sizes(self, prefix: str, expected: dict[str, int]) -> None:
        paginator = self.s3.get_paginator("list_objects_v2")
        try:
            found = {item["Key"][len(prefix):]: item["Size"]
                     for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix)
                     for item in page.get("Contents", [])}
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{prefix}: listing to confirm sizes: {error}") from error
        wrong = [name for name, size in expected.items() if found.get(name) != size]
        if wrong:
            raise RemoteStoreError(f"s3://{self.bucket}/{prefix}{wrong[0]}: not stored with its full size")

    def _put(self, name: str, obj: dict[str, Any], *, absolute: bool = True) -> None:
        key = name if absolute else self.key(name)
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=json.dumps(obj, indent=1).encode(),
                               ContentType="application/json")
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error

    def _put_if(self, name: str, obj: dict[str, Any], *, expected: str | None) -> bool:
        """A conditional write of the job's `name` (conditional.py): False when another writer got there first."""
        key, body = self.key(name), json.dumps(obj, indent=1).encode()
        try:
            return write_if(self.s3, self.bucket, key, body, expected=expected) is not None
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error

    def _get_with_etag(self, name: str, *, absolute: bool = False) -> tuple[dict[str, Any] | None, str | None]:
        key = name if absolute else self.key(name)
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=key)
            body = response["Body"].read()
        except ClientError as error:
            if is_missing(error):
                return None, None
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error
        except BotoCoreError as error:
            raise RemoteStoreError(f"s3://{self.bucket}/{key}: {error}") from error
        try:
            record = json.loads(body)
        except ValueError as error:
            raise DamagedRecord(f"s3://{self.bucket}/{key}: not valid JSON ({error})", response["ETag"]) from error
        if not isinstance(record, dict):  # every record we write is an object: this one was not ours
            raise DamagedRecord(f"s3://{self.bucket}/{key}: expected a JSON object, found {type(record).__name__}",
                                response["ETag"])
        return record, response["ETag"]

    @staticmethod
    def _remove(path: Path) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
