"""A checkpoint DCP wrote in shards on several nodes (shards.py), published once, whole, and never changed.

Each node uploads the files its ranks wrote under the step's prefix, in a folder of the save's own
(`saves/<save>/`), then a part record naming them (their sizes and block SHA-256s):

    coordinator's node   (it holds `.metadata`) its `.metadata` files first, then a first record naming
                         them, so the other nodes may start at once; then its shards and the files rank 0
                         writes alone (`trainer_state.json`, `meta.pt`), then its complete record
    any other node       once the coordinator's record of the save its shards belong to is in S3: the shards
                         that `.metadata` lists, each proven to be that save's by its storage data (the file
                         is exactly as long as the chunks `.metadata` places in it) and by its time (written
                         before `.metadata`)

Every object of a save is written only where none is yet (If-None-Match on PutObject and
CompleteMultipartUpload, conditional.CreateOnly): a second writer of a key fails, so a late or stale
shard never replaces one already there, and nothing is written into a save once it is settled.

A record's key says which save, which node and which ranks it covers (part_keys.py), so one listing tells
whether a save is whole (part_records.py): the coordinator's complete record is there and every rank
`.metadata` lists is covered. Whoever finds it whole settles it (`SETTLED-<save>.json`, a conditional write one
node wins) and publishes it; a save not whole in time is abandoned (step_publish.py). A node that dies
mid-upload leaves no record, so its step is never published and the previous one stands.

This module sends this node's part, and keeps the steps it sent a part of that were not whole then, which the
node follows until they are published or abandoned; the records, the settling and the publish are the classes
it builds on.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..failure_causes import FailureCause
from ..files.checksums import BLOCK_BYTES
from ..files.regular_files import open_regular
from ..s3 import job_keys as keys
from ..saves import shards
from ..upload_outcome import UploadOutcome
from .checkpoint_files import checkpoint_files, stored_files
from .part_keys import PartKey, PartTag
from .part_listing import Save
from .remote import RemoteStoreError
from .step_publish import SettledSteps

log = logging.getLogger(__name__)


@dataclass
class StepParts(SettledSteps):
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _awaiting: dict[int, float] = field(default_factory=dict)  # step → when this node's part went up unpublished

    def upload(self, local: Path, step: int) -> UploadOutcome:
        """Send this node's part of `step` and publish the step if it is now whole: PUBLISHED once published,
        PART_SENT when sent and the step is not published yet, NOT_PUBLISHED when S3 holds this step or a newer
        one already."""
        latest = self.store.latest_step()
        if latest is not None and latest >= step:
            log.warning("not uploading the shards of step %d: latest.json already holds step %d", step, latest)
            return UploadOutcome.NOT_PUBLISHED
        files = checkpoint_files(local)
        if shards.holds_metadata(local):
            identity = self._send_coordinators_part(local, step, files)
        else:
            save = self.coordinator_save(step)  # read afresh: a newer save of the step may have begun
            if save is None:
                raise RemoteStoreError(f"step {step}: the node holding its .metadata has not sent it",
                                       cause=FailureCause.NO_COORDINATOR)
            files = {name: path for name, path in files.items() if name in save.listed}
            why = save.refusal(files) if files else "the shards here are not listed by it"
            if why:
                raise RemoteStoreError(f"step {step}: the shards here are not those of the save whose .metadata is "
                                       f"in S3 ({why}): not sent", cause=FailureCause.ANOTHER_SAVE)
            if (settled := self.settlement(step, save.identity)) is not None:
                raise RemoteStoreError(f"step {step}: its save is settled ({settled.get('outcome')}) already: "
                                       "nothing more goes into it", cause=FailureCause.SETTLED)
            identity = save.identity
            self._send_part(local, step, files, identity, PartTag.RANKS, save.covered(set(files)))
        with self._lock:
            self.sent[step] = identity
        log.info("step %d: sent this node's part to s3://%s/%s", step, self.store.bucket, self.store.step_prefix(step))
        if self.publish_if_whole(step):
            return UploadOutcome.PUBLISHED
        with self._lock:
            self._awaiting[step] = time.monotonic()
        return UploadOutcome.PART_SENT

    def awaiting_publish(self) -> dict[int, float]:
        """The steps this node sent a part of that were not whole then, and when (time.monotonic): followed
        until published or abandoned (agent/several_nodes/sharded_saves.py)."""
        with self._lock:
            return dict(self._awaiting)

    def stop_awaiting(self, step: int) -> None:
        """`step` is published or abandoned: no longer followed."""
        with self._lock:
            self._awaiting.pop(step, None)

    def _send_coordinators_part(self, local: Path, step: int, files: dict[str, Path]) -> str:
        """`.metadata` first, with a first record; then the listed shards and rank 0's own files."""
        metadata = {name: path for name, path in files.items() if name.rsplit("/", 1)[-1] == shards.METADATA}
        saved_at = max(path.stat().st_mtime for path in metadata.values())
        bodies = {name: _read(path) for name, path in metadata.items()}
        identity = shards.metadata_identity(bodies)
        sizes: dict[str, int] = {}
        for name, body in bodies.items():
            folder = name.rsplit("/", 1)[0] if "/" in name else ""
            ends = shards.extents(body)
            if ends is None:
                raise RemoteStoreError(f"checkpoint {local}: {name} holds no storage data (not DCP's .metadata)",
                                       cause=FailureCause.NO_STORAGE_DATA)
            sizes |= {shards.in_folder(folder, shard): end for shard, end in ends.items()}
        save = Save(identity, self.store.instance, sizes, saved_at)
        rest = {name: path for name, path in files.items() if name not in metadata and
                (not name.endswith(shards.SHARD_SUFFIX) or name in save.listed)}
        if why := save.refusal({name: path for name, path in rest.items() if name in save.listed}):
            raise RemoteStoreError(f"checkpoint {local}: its shards are not those its .metadata describes ({why}): "
                                   "not sent", cause=FailureCause.ANOTHER_SAVE)
        carried = self._send_part(local, step, metadata, identity, PartTag.METADATA, set(), saved_at=saved_at)
        self._send_part(local, step, rest, identity, PartTag.COORDINATOR, save.covered(set(rest)), carried=carried,
                        saved_at=saved_at)
        return identity

    def _send_part(self, local: Path, step: int, files: dict[str, Path], identity: str, tag: PartTag, ranks: set[int],
                   *, saved_at: float = 0.0, carried: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send `files`, each only where no object is yet, then the record naming them and what an earlier
        record of this part `carried`."""
        prefix = self.store.step_prefix(step)
        # Each save's objects under a folder of its own: a late part of one save never lands in another's.
        folder = keys.save_objects(identity)
        stored, left_out = stored_files(files, prefix + folder)
        stored = {folder + key: named for key, named in stored.items()}
        if left_out:
            raise RemoteStoreError(f"step {step}: S3 cannot take {left_out[0]!r} (a key over 1024 bytes)",
                                   cause=FailureCause.LEFT_OUT)
        sent = self.store.send_files(local, stored, prefix, create_only=True) if stored else {}
        entries = {**(carried or {}), **sent}
        record = {"step": step, "name": local.name, "kind": "directory", "block_bytes": BLOCK_BYTES,
                  "coordinator": tag != PartTag.RANKS, "complete": tag != PartTag.METADATA, "metadata": identity,
                  "files": entries, **({"saved_at": saved_at} if tag != PartTag.RANKS else {}),
                  "instance": self.store.instance, "written_at": time.time()}
        key = PartKey(keys.save_folder(identity), tag, frozenset(ranks), self.store.instance)
        # A record exists already only when this node sent it before (its name holds this instance).
        self.store.create_once(keys.checkpoint_prefix(step) + key.name(), record)
        return entries


def _read(path: Path) -> bytes:
    with open_regular(path) as stream:
        return stream.read()
