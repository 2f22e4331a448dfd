"""The S3 checkpoint store of one job: upload, publish, restore with fallback, retention.

The layout under `s3://<bucket>/<job>/` is in job_keys.py: a checkpoint's objects, then its manifest,
then latest.json, which moves only after the manifest exists.

A checkpoint without a manifest is never restored, and `latest.json` is changed with a conditional
write so two publishers can never interleave; the lower step or the lower fencing token loses.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig
from botocore.exceptions import BotoCoreError, ClientError

from ..failure_causes import FailureCause
from ..files import whole_files
from ..files.checksums import BLOCK_BYTES
from ..files.staging import set_named
from ..s3 import job_keys as keys
from ..s3.conditional import is_missing
from ..s3.job_objects import DamagedRecord, JobObjects, RemoteStoreError
from ..s3.key_names import manifest_fields, shown
from ..s3.latest_record import LatestRecord
from ..s3.lease import Lease
from ..saves.layouts import Checkpoint, published
from ..saves.shards import NodeRanks
from ..upload_outcome import UploadOutcome
from .checkpoint_files import checkpoint_files, file_version, names_shown, stored_files
from .checkpoint_restore import FILE_SET, restore_step
from .held_steps import not_whole

log = logging.getLogger(__name__)

MANIFEST = keys.MANIFEST
STEP_PREFIX = re.compile(r"step-(\d+)/$")


class CheckpointStore(JobObjects):
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
        super().__init__(s3, bucket, job, transfer_config=transfer_config, instance=instance)
        self.keep = keep
        self.restored_step: int | None = None  # the step the last restore_at_or_below brought back
        self.damaged_steps: set[int] = set()  # steps a restore proved damaged (not merely unreachable)
        # Told which files of a step were left out (names S3 cannot take), beside the log line.
        self.on_left_out: Callable[[int, list[str]], None] = lambda step, names: None
        # Why this writer may publish nothing now ('' when it may): a world left in a region the job moved from.
        self.publish_fence: Callable[[], str] | None = None

    # ---- keys ---------------------------------------------------------------------------------
    def step_prefix(self, step: int) -> str:
        return self.key(keys.checkpoint_prefix(step))

    # ---- upload and publish -------------------------------------------------------------------
    def upload(self, local: Path, step: int, *, lease: Lease | None = None) -> UploadOutcome:
        """Upload a committed checkpoint, then publish it unless a newer step or holder already did: PUBLISHED,
        or NOT_PUBLISHED when S3 held this step or a newer one already, or the lease was lost."""
        local = Path(local)
        prefix = self.step_prefix(step)
        stored, left_out = stored_files(checkpoint_files(local), prefix)
        if not stored:
            raise RemoteStoreError(f"checkpoint {local}: S3 can take none of its files ({names_shown(left_out)}: keys "
                                   "over 1024 bytes): shorten their paths", cause=FailureCause.LEFT_OUT)
        current, etag = self.latest_record()  # read once: checked here, reused by publish
        latest = current.step if current else None
        if latest is not None and latest >= step:
            # Checked before sending any byte too: re-uploading a published step could mix its objects.
            log.warning("not uploading step %d: latest.json already holds step %d", step, latest)
            return UploadOutcome.NOT_PUBLISHED
        if left_out:
            log.warning("checkpoint step %d: left out %s (an S3 key is at most 1024 bytes): shorten their paths; "
                        "the rest is uploaded", step, names_shown(left_out))
            self.on_left_out(step, [shown(name) for name in left_out])
        started = time.monotonic()
        entries = self.send_files(local, stored, prefix)
        set_name = set_named(local)  # a fixed-name checkpoint and the entries beside it, restored beside it
        manifest: dict[str, Any] = {
            "step": step,
            "kind": FILE_SET if set_name else "file" if local.is_file() else "directory",
            "name": set_name or local.name,
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
        return UploadOutcome.of(published)

    def send_files(self, local: Path, stored: dict[str, tuple[str, Path]], prefix: str, *,
                   create_only: bool = False) -> dict[str, Any]:
        """Upload key → (name, path) under the absolute `prefix`, each file read once as it goes out; key →
        manifest entry (size, block SHA-256s of the bytes sent, the SHA-256 S3 holds, name), once S3 is seen to
        hold exactly those bytes (job_objects.confirm_sent). A file rewritten meanwhile fails it, when its size
        or time shows it. `create_only`: each object only where none is yet (a save's objects: a second writer
        fails)."""
        files = {key: path for key, (_, path) in stored.items()}
        try:
            before = {key: file_version(path) for key, path in files.items()}
            refuse_cut_short(local)
            total = sum(size for size, _ in before.values())
            if create_only:
                writers = {prefix + key: f"{self.instance}/{size}/{mtime}" for key, (size, mtime) in before.items()}
                sent = self.create_all({prefix + key: path for key, path in files.items()}, total, writers)
            else:
                sent = self.send_all({prefix + key: path for key, path in files.items()}, total)
            if changed := sorted(stored[key][0] for key, path in files.items() if file_version(path) != before[key]):
                raise RemoteStoreError(f"checkpoint {local}: {names_shown(changed)} changed while it was uploaded "
                                       "(rewritten in place, not written then renamed): not published",
                                       cause=FailureCause.REWRITTEN)
        except OSError as error:
            raise RemoteStoreError(f"checkpoint {local} changed while uploading: {error}") from error
        return {key: {"size": sent[prefix + key].size, "sha256_blocks": sent[prefix + key].blocks,
                      "sha256_s3": sent[prefix + key].sha256, **manifest_fields(name, key)}
                for key, (name, _) in stored.items()}

    def publish(self, step: int, *, lease: Lease | None = None, attempts: int = 5,
                read: tuple[LatestRecord | None, str | None] | None = None) -> bool:
        """Point latest.json at `step` if it is newer and (with a lease) we still hold the job.

        The write is conditional on the version we read (`read`, when the caller just read it); when
        another writer got in between, read again and decide again, so the newest step wins whatever
        the interleaving.
        """
        for _ in range(attempts):
            current, etag = read or self.latest_record()
            read = None
            refusal = self.publish_refusal(step, current, lease) or (self.publish_fence() if self.publish_fence else "")
            if refusal:
                log.warning("not publishing step %d: %s", step, refusal)
                return False
            record = LatestRecord.new(step, self.step_prefix(step), lease.token if lease else 0)
            if self._put_body_if(keys.LATEST, record.to_json(), expected=etag):
                return True
        log.warning("not publishing step %d: latest.json kept changing under us", step)
        return False

    @staticmethod
    def publish_refusal(step: int, current: LatestRecord | None, lease: Lease | None) -> str:
        """Why `step` must not become latest ('' when it may)."""
        if current is not None and current.step >= step:
            return f"latest.json already holds step {current.step}"
        token = lease.token if lease else 0
        if current is not None and current.lease_token > token:
            return f"a newer lease holder (token {current.lease_token}) published already"
        if lease is not None and not lease.still_ours():
            return "the job lease is no longer ours"
        return ""

    def latest_step(self) -> int | None:
        latest, _ = self.latest_record()
        return latest.step if latest else None

    def latest_record(self) -> tuple[LatestRecord | None, str | None]:
        """latest.json and its ETag. A damaged one (empty, HTML, a step that is not a number) is named in
        one line and the newest complete checkpoint S3 holds stands in for it; its ETag is kept, so the next
        publish replaces it conditionally."""
        try:
            return self.read_latest()
        except DamagedRecord as error:
            newest = self.newest_complete_step()
            log.warning("%s; going by the checkpoints S3 holds (newest complete: %s)", error,
                        "none" if newest is None else f"step {newest}")
            return (LatestRecord(newest, self.step_prefix(newest)) if newest is not None else None), error.etag

    def read_latest(self) -> tuple[LatestRecord | None, str | None]:
        """latest.json as it is and its ETag ((None, None) before the first publish); a damaged one raises
        DamagedRecord."""
        body, etag = self._get_body_with_etag(keys.LATEST)
        if body is None:
            return None, None
        try:
            return LatestRecord.from_json(body), etag
        except ValueError as error:
            raise DamagedRecord(f"s3://{self.bucket}/{self.key(keys.LATEST)}: {error}", etag) from error

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

    def restore_at_or_below(self, dest_dir: Path, latest: int | None, ranks: NodeRanks | None = None) -> Path | None:
        """`restore` for a caller that already read latest.json (None: consider every checkpoint); with
        `ranks`, a sharded step only as far as those ranks read it (checkpoint_restore.py)."""
        self.restored_step = None
        restored = self.restore_checkpoint(dest_dir, latest, ranks)
        self.restored_step = restored.step if restored else None
        return restored.path if restored else None

    def restore_checkpoint(self, dest_dir: Path, latest: int | None,
                           ranks: NodeRanks | None = None) -> Checkpoint | None:
        """The newest checkpoint at or below `latest` that restores whole into dest_dir, at its step in S3
        (None: consider every checkpoint; `ranks`: what those ranks read of a sharded step)."""
        dest_dir = Path(dest_dir)
        dest_dir.mkdir(parents=True, exist_ok=True)
        candidates = [s for s in self.remote_steps() if latest is None or s <= latest]
        for step in sorted(candidates, reverse=True):
            restored = restore_step(self, self.step_prefix(step), step, dest_dir, self.damaged_steps, ranks)
            if restored is not None:
                return published(restored, step)
        return None

    def repoint(self, step: int, named: int) -> bool:
        """latest.json names `named`, which could not be restored: point it at `step`, the newest that
        could, unless it changed meanwhile. Later steps then publish, and "in S3" means restorable."""
        current, etag = self.latest_record()
        if current is None or current.step != named or etag is None:
            return False
        record = LatestRecord.new(step, self.step_prefix(step), current.lease_token)
        return self._put_body_if(keys.LATEST, record.to_json(), expected=etag)

    def remote_steps(self) -> list[int]:
        """Every step with objects under checkpoints/, complete or not, ascending."""
        paginator = self.s3.get_paginator("list_objects_v2")
        steps: list[int] = []
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.key(keys.CHECKPOINTS), Delimiter="/"):
            for common in page.get("CommonPrefixes", []):
                if match := STEP_PREFIX.search(common["Prefix"]):
                    steps.append(int(match.group(1)))
        return sorted(steps)

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

    def not_whole(self, step: int) -> str:
        """Why published `step` would not restore whole, from its manifest and a HEAD of each object ('' when
        it would); S3 failing to answer raises."""
        return not_whole(self, self.step_prefix(step))

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


def refuse_cut_short(local: Path) -> None:
    """A single-file checkpoint whose format proves it whole was checked before its turn came: cut short or
    rewritten since, it must not go up (checked after its size and time are taken, which the upload holds)."""
    if local.is_file() and whole_files.proof(local) is False:
        raise RemoteStoreError(f"checkpoint {local.name} is no longer whole (cut short or rewritten in place after "
                               "it was checked): not uploaded; the next checkpoint goes up",
                               cause=FailureCause.CUT_SHORT)
