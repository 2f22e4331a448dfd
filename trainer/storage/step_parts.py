"""A checkpoint DCP wrote in shards on several nodes (shards.py), published once, whole.

Each node uploads the files its ranks wrote under the step's prefix, in a folder of the save's own
(`saves/<save>/`), then a part record, `MANIFEST-<instance>.json` (the files it sent, their sizes and
block SHA-256s):

    coordinator's node   (it holds `.metadata`) its `.metadata` files first, then a first record naming
                         them, so the other nodes may start at once; then its shards and the files rank 0
                         writes alone (`trainer_state.json`, `meta.pt`), then its record again, complete
    any other node       once the coordinator's record of the save its shards belong to is in S3 (its
                         `.metadata` exists only after every rank finished writing, and was written after
                         them): the shards that `.metadata` lists and its disk holds

Every record names the save by its `.metadata` (shards.metadata_identity): a round that trains the same
step again saves other metadata, and parts of two saves never mix. Whoever sends the last part finds
the save whole (the coordinator's record complete, every shard each `.metadata` lists in a record of
that save), wins the save's settling (`SETTLED-<save>.json`, a conditional write), writes the step's
MANIFEST.json from the records and moves latest.json (the store's conditional publish, which never goes
back). A node that dies mid-upload leaves no record, so its step is never published and the previous
one stands; a node whose part's step is not whole PARTS_ARRIVAL_SECONDS later abandons it (`abandon`:
settled as abandoned, its objects removed), and retention removes every unpublished step below the
published one.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from . import job_keys as keys
from . import shards
from .checkpoint_files import checkpoint_files, stored_files
from .checksums import BLOCK_BYTES
from .conditional import is_missing
from .job_keys import MANIFEST
from .key_names import key_name, local_name
from .regular_files import open_regular
from .remote import RemoteStore, RemoteStoreError
from .uploader import PART

log = logging.getLogger(__name__)

PART_PREFIX = "MANIFEST-"  # + <instance>.json, beside the step's objects
SAVE_FOLDER = "saves/"  # + <save identity>/ + the files of that save's parts
SETTLED_PREFIX = "SETTLED-"  # + <save identity>.json: the one node that publishes or abandons a save
PARTS_ARRIVAL_SECONDS = 120.0  # from the coordinator's part in S3 to the last node's part
# A node's shards belong to a save only if written before its .metadata (DCP writes .metadata once every
# rank has written): a shard written later is a newer save's. Nodes' clocks agree within this (on EC2,
# the Amazon Time Sync Service keeps them within a millisecond or so).
CLOCK_ALLOWANCE_SECONDS = 1.0


@dataclass(frozen=True)
class Save:
    """What the coordinator's record says of one save: its identity and the shards each `.metadata` lists."""

    identity: str
    listed: frozenset[str]  # every shard's name inside the checkpoint
    complete: bool  # the coordinator's record lists all its files, not only its `.metadata`
    saved_at: float  # when its `.metadata` was written (epoch seconds, the coordinator's clock)

    def holds(self, shard_files: list[Path]) -> bool:
        """These shards of a node's own were written for this save: before its `.metadata`."""
        try:
            written = max((path.stat().st_mtime for path in shard_files), default=0.0)
        except OSError:
            return False
        return written <= self.saved_at + CLOCK_ALLOWANCE_SECONDS


@dataclass
class StepParts:
    store: RemoteStore
    sent: dict[int, str] = field(default_factory=dict)  # step → the save this node last sent a part of
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- what S3 holds of a step --------------------------------------------------------------
    @staticmethod
    def part_name(step: int, instance: str) -> str:
        """A node's part record of `step`, under the job's prefix."""
        return f"{keys.checkpoint_prefix(step)}{PART_PREFIX}{instance}.json"

    def records(self, step: int) -> list[dict[str, Any]]:
        """Every part record of `step` in S3 (a damaged one is named and skipped)."""
        prefix = f"{self.store.step_prefix(step)}{PART_PREFIX}"
        paginator = self.store.s3.get_paginator("list_objects_v2")
        try:
            names = [item["Key"] for page in paginator.paginate(Bucket=self.store.bucket, Prefix=prefix)
                     for item in page.get("Contents", [])]
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.store.bucket}/{prefix}: listing the parts: {error}") from error
        found = (self.store.read_record(name, absolute=True) for name in sorted(names))
        return [record for record in found if isinstance(record, dict) and isinstance(record.get("files"), dict)]

    def coordinator_save(self, step: int, records: list[dict[str, Any]] | None = None) -> Save | None:
        """The save the coordinator's record of `step` describes, read from the `.metadata` it sent; None
        while there is none. `records`: the step's part records, when the caller has just listed them."""
        parts = self.records(step) if records is None else records
        coordinator = _newest([r for r in parts if r.get("coordinator") is True])
        if coordinator is None:
            return None
        bodies: dict[str, bytes] = {}
        for key, entry in coordinator["files"].items():
            name = local_name(key, entry)
            if name.rsplit("/", 1)[-1] == shards.METADATA:
                if (body := self._object(self.store.step_prefix(step) + key)) is None:
                    return None  # removed meanwhile (an abandoned save): no save to join
                bodies[name] = body
        if shards.metadata_identity(bodies) != coordinator.get("metadata"):
            return None  # a newer save's metadata is on its way over this one's: not yet readable
        listed: set[str] = set()
        for name, body in bodies.items():
            folder = name.rsplit("/", 1)[0] if "/" in name else ""
            names = shards.listed_in_bytes(body)
            if names is None:
                raise RemoteStoreError(f"s3://{self.store.bucket}/{self.store.step_prefix(step)}{key_name(name)}: "
                                       "not a torch.distributed.checkpoint .metadata")
            listed |= {shards.in_folder(folder, shard) for shard in names}
        return Save(str(coordinator["metadata"]), frozenset(listed), bool(coordinator.get("complete")),
                    float(coordinator.get("saved_at") or 0.0))

    def _object(self, key: str) -> bytes | None:
        try:
            return bytes(self.store.s3.get_object(Bucket=self.store.bucket, Key=key)["Body"].read())
        except ClientError as error:
            if is_missing(error):
                return None
            raise RemoteStoreError(f"s3://{self.store.bucket}/{key}: {error}") from error
        except BotoCoreError as error:
            raise RemoteStoreError(f"s3://{self.store.bucket}/{key}: {error}") from error

    # ---- upload ---------------------------------------------------------------------------------
    def upload(self, local: Path, step: int) -> bool | str:
        """Send this node's part of `step` and publish the step if it is now whole: True once published, PART
        when sent and other parts are missing, False when S3 holds this step or a newer one already."""
        latest = self.store.latest_step()
        if latest is not None and latest >= step:
            log.warning("not uploading the shards of step %d: latest.json already holds step %d", step, latest)
            return False
        files = checkpoint_files(local)
        prefix = self.store.step_prefix(step)
        carried: dict[str, Any] = {}
        saved_at = 0.0
        if shards.holds_metadata(local):
            metadata = {name: path for name, path in files.items() if name.rsplit("/", 1)[-1] == shards.METADATA}
            saved_at = max(path.stat().st_mtime for path in metadata.values())
            bodies = {name: _read(path) for name, path in metadata.items()}
            identity, coordinator = shards.metadata_identity(bodies), True
            carried = self._send_part(local, step, metadata, identity, coordinator=True, complete=False,
                                      saved_at=saved_at)
            files = {name: path for name, path in files.items() if name not in metadata}
        else:
            save = self.coordinator_save(step)  # read afresh: a newer save of the step may have begun
            if save is None:
                raise RemoteStoreError(f"step {step}: the node holding its .metadata has not sent it",
                                       cause="no coordinator's part")
            files = {name: path for name, path in files.items() if name in save.listed}
            if not files or not save.holds(list(files.values())):
                raise RemoteStoreError(f"step {step}: the shards here are not those of the save whose .metadata is "
                                       "in S3 (written after it, or not listed by it): not sent",
                                       cause="shards of another save")
            identity, coordinator = save.identity, False
        self._send_part(local, step, files, identity, coordinator=coordinator, complete=True, carried=carried,
                        saved_at=saved_at)
        with self._lock:
            self.sent[step] = identity
        log.info("step %d: sent this node's part to s3://%s/%s", step, self.store.bucket, prefix)
        return True if self.publish_if_whole(step) else PART

    def _send_part(self, local: Path, step: int, files: dict[str, Path], identity: str, *, coordinator: bool,
                   complete: bool, saved_at: float, carried: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send `files`, then the record naming them and what an earlier record of this part `carried`."""
        prefix = self.store.step_prefix(step)
        # Each save's objects under a folder of its own: a late part of one save never overwrites another's.
        folder = f"{SAVE_FOLDER}{identity[:16]}/"
        stored, left_out = stored_files(files, prefix + folder)
        stored = {folder + key: named for key, named in stored.items()}
        if left_out:
            raise RemoteStoreError(f"step {step}: S3 cannot take {left_out[0]!r} (a key over 1024 bytes)",
                                   cause="file names S3 cannot take")
        entries = {**(carried or {}), **(self.store.send_files(local, stored, prefix) if stored else {})}
        record = {"step": step, "name": local.name, "kind": "directory", "block_bytes": BLOCK_BYTES,
                  "coordinator": coordinator, "complete": complete, "metadata": identity, "files": entries,
                  **({"saved_at": saved_at} if coordinator else {}),
                  "instance": self.store.instance, "written_at": time.time()}
        self.store.put_json(self.part_name(step, self.store.instance), record)
        return entries

    # ---- publish --------------------------------------------------------------------------------
    def missing(self, step: int) -> tuple[Save | None, list[str], list[dict[str, Any]]]:
        """The coordinator's save of `step`, the shards no part of that save holds yet (while the
        coordinator's own record is not complete, its files are missing too: `Save.complete`), and the
        complete parts of that save, from one listing."""
        records = self.records(step)
        save = self.coordinator_save(step, records)
        if save is None:
            return None, [], []
        parts = [record for record in records if record.get("metadata") == save.identity and record.get("complete")]
        held = {local_name(key, entry) for record in parts for key, entry in record["files"].items()}
        return save, sorted(save.listed - held), parts

    def publish_if_whole(self, step: int) -> bool:
        """MANIFEST.json from the parts of one save, then latest.json, once every listed shard is in S3. Of
        the nodes that find it whole, and a node abandoning it, one settles it (a conditional write)."""
        save, missing, records = self.missing(step)
        if save is None or missing or not save.complete:
            return False
        if (latest := self.store.latest_step()) is not None and latest >= step:
            return latest == step  # the node whose part arrived with ours published it
        if not self.store.create_once(self.settled_name(step, save.identity), {"outcome": "published",
                                                                                "instance": self.store.instance}):
            return False  # another node publishes it, or abandoned it
        files: dict[str, Any] = {}
        for record in sorted(records, key=lambda r: bool(r.get("coordinator"))):  # the coordinator's win
            files.update(record["files"])
        manifest = {"step": step, "kind": "directory", "name": _newest(records)["name"],  # type: ignore[index]
                    "block_bytes": BLOCK_BYTES, "files": files, "written_at": time.time(),
                    "instance": self.store.instance, "parts": sorted(str(r.get("instance")) for r in records),
                    "metadata": save.identity}
        name = keys.checkpoint_prefix(step) + MANIFEST
        if not self.store.create_once(name, manifest):  # a racing node wrote this save's, or one of an older save
            written = self.store.read_record(name) or {}
            if written.get("metadata") != save.identity:  # left by a save whose publish never came: replaced
                self.store.put_json(name, manifest)
        published = self.store.publish(step)
        if published:
            self.store.apply_retention(latest=step)
            log.info("step %d is whole in S3 (%d parts, %d files): published", step, len(records), len(files))
        return published

    @staticmethod
    def settled_name(step: int, identity: str) -> str:
        return f"{keys.checkpoint_prefix(step)}{SETTLED_PREFIX}{identity}.json"

    def missing_parts(self, step: int) -> str:
        """Which parts of `step` are not in S3, for a line: the ranks by their shards' names, or the part of
        the node holding `.metadata`."""
        save, missing, _ = self.missing(step)
        if save is None or not save.complete:
            return "the part of the node holding its .metadata"
        ranks = sorted({rank for name in missing if (rank := shards.rank_of(name)) is not None})
        return f"the shards of rank(s) {', '.join(map(str, ranks))}" if ranks else "no part (it is whole)"

    def abandon(self, step: int) -> bool:
        """Remove what S3 holds of the unpublished save of `step` this node sent a part of: only while the
        coordinator's record still names that save (another save of the step may have begun), and only
        once this node wins the save's settling over a node publishing it. True when removed."""
        sent = self.sent.get(step)
        current = self.coordinator_save(step)
        if sent is None or current is None or current.identity != sent:
            return False
        if not self.store.create_once(self.settled_name(step, sent), {"outcome": "abandoned",
                                                                       "instance": self.store.instance}):
            return False  # published (or abandoned) by another node meanwhile
        self.store.delete_step(step)
        return True


def _newest(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    return max(records, key=lambda r: float(r.get("written_at") or 0), default=None)


def _read(path: Path) -> bytes:
    with open_regular(path) as stream:
        return stream.read()
