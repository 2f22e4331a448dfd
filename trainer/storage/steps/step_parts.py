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

A record's key says which save, which node and which ranks it covers
(`parts/<save>/<coordinator|ranks>.<ranks>/<instance>.json`), so one listing tells whether a save is
whole: the coordinator's complete record is there and every rank `.metadata` lists is covered. Whoever
finds it whole settles it (`SETTLED-<save>.json`, a conditional write one node wins) and becomes its
publisher: it reads the records once, writes the step's MANIFEST.json from them and moves latest.json (the
store's conditional publish, which never goes back). A publish that meets S3 errors is retried by the
publisher, and by every node that sent a part once the settling is FINISH_TAKEOVER_SECONDS old (`finish`),
until the step is published or a newer one is. A node that dies mid-upload leaves no record, so its step
is never published and the previous one stands; a node whose part's save is not whole
PARTS_ARRIVAL_SECONDS later abandons it (`abandon`: settled as abandoned, its objects removed).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..failure_causes import FailureCause
from ..files.checksums import BLOCK_BYTES
from ..files.regular_files import open_regular
from ..s3 import job_keys as keys
from ..s3.conditional import is_missing
from ..s3.job_keys import MANIFEST
from ..s3.key_names import key_name, local_name
from ..saves import shards
from ..upload_outcome import UploadOutcome
from .checkpoint_files import checkpoint_files, stored_files
from .remote import RemoteStore, RemoteStoreError

log = logging.getLogger(__name__)

SAVE_FOLDER = "saves/"  # + <save>/ + the files of that save's parts
PART_FOLDER = "parts/"  # + <save>/<tag>/<instance>.json: the part records
SETTLED_PREFIX = "SETTLED-"  # + <save identity>.json: the one node that publishes or abandons a save
METADATA_TAG, COORDINATOR_TAG, RANKS_TAG = "metadata", "coordinator", "ranks"
PARTS_ARRIVAL_SECONDS = 120.0  # from the coordinator's part in S3 to the last node's part
FINISH_TAKEOVER_SECONDS = 30.0  # a settled save its publisher has not published by then: any node finishes it
# A node's shards belong to a save only if written before its .metadata (DCP writes .metadata once every
# rank has written): a shard written later is a newer save's. Nodes' clocks agree within this (on EC2,
# the Amazon Time Sync Service keeps them within a millisecond or so).
CLOCK_ALLOWANCE_SECONDS = 1.0
PUBLISHED, ABANDONED = "published", "abandoned"


def save_folder(identity: str) -> str:
    return identity[:16]


def ranks_text(ranks: set[int]) -> str:
    """0,1,2,3,8 → '0-3_8': a node's ranks in a key."""
    runs: list[list[int]] = []
    for rank in sorted(ranks):
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return "_".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def ranks_of_text(text: str) -> set[int]:
    found: set[int] = set()
    for run in filter(None, text.split("_")):
        first, _, last = run.partition("-")
        found |= set(range(int(first), int(last or first) + 1))
    return found


@dataclass(frozen=True)
class PartKey:
    """What a part record's key says: its save, its kind (METADATA_TAG, COORDINATOR_TAG, RANKS_TAG), the ranks
    whose every listed shard it holds, and the node that sent it."""

    save: str
    tag: str
    ranks: frozenset[int]
    instance: str

    @staticmethod
    def parse(relative: str) -> PartKey | None:
        parts = relative.split("/")
        if len(parts) != 4 or parts[0] + "/" != PART_FOLDER or not parts[3].endswith(".json"):
            return None
        tag, _, ranks = parts[2].partition(".")
        try:
            return PartKey(parts[1], tag, frozenset(ranks_of_text(ranks)), parts[3][:-len(".json")])
        except ValueError:
            return None

    def name(self) -> str:
        tag = self.tag + (f".{ranks_text(set(self.ranks))}" if self.tag != METADATA_TAG else "")
        return f"{PART_FOLDER}{self.save}/{tag}/{self.instance}.json"


@dataclass(frozen=True)
class Save:
    """One save as its coordinator's `.metadata` describes it."""

    identity: str
    coordinator: str  # the instance that sent its `.metadata`
    sizes: dict[str, int]  # every shard's name inside the checkpoint → its size, from the storage data
    saved_at: float  # when its `.metadata` was written (epoch seconds, the coordinator's clock)

    @property
    def listed(self) -> frozenset[str]:
        return frozenset(self.sizes)

    def ranks(self) -> set[int] | None:
        """The ranks whose shards `.metadata` lists (None when a shard's name does not say its rank)."""
        found = {shards.rank_of(name) for name in self.sizes}
        return None if None in found else {rank for rank in found if rank is not None}

    def refusal(self, files: dict[str, Path]) -> str:
        """'' when these shards of a node's own are this save's: each listed, as long as its storage data
        says, and written before its `.metadata`; else why not."""
        for name, path in sorted(files.items()):
            try:
                found = path.stat()
            except OSError as error:
                return f"{name}: {error}"
            if name not in self.sizes:
                return f"{name} is not listed by it"
            if found.st_size != self.sizes[name]:
                return f"{name} holds {found.st_size} bytes, its storage data {self.sizes[name]}"
            if found.st_mtime > self.saved_at + CLOCK_ALLOWANCE_SECONDS:
                return f"{name} was written after it"
        return ""

    def covered(self, files: set[str]) -> set[int]:
        """The ranks whose every listed shard is among `files`."""
        by_rank: dict[int, set[str]] = {}
        for name in self.sizes:
            if (rank := shards.rank_of(name)) is not None:
                by_rank.setdefault(rank, set()).add(name)
        return {rank for rank, names in by_rank.items() if names <= files}


@dataclass
class Listing:
    """One listing of a step's part records: by key, with S3's time of each."""

    parts: list[tuple[PartKey, float]]

    def newest_metadata(self) -> list[PartKey]:
        """The coordinators' first records written last (S3 times them to the second: several may tie)."""
        found = [(when, key) for key, when in self.parts if key.tag == METADATA_TAG]
        last = max((when for when, _ in found), default=None)
        return [key for when, key in found if when == last]

    def of_save(self, save: str) -> list[PartKey]:
        return [key for key, _ in self.parts if key.save == save and key.tag != METADATA_TAG]

    def missing_ranks(self, save: Save) -> tuple[bool, set[int]] | None:
        """(the coordinator's complete record is there, the ranks no record covers); None when the ranks
        cannot be told from the names."""
        wanted = save.ranks()
        if wanted is None:
            return None
        parts = self.of_save(save_folder(save.identity))
        complete = any(key.tag == COORDINATOR_TAG and key.instance == save.coordinator for key in parts)
        return complete, wanted - {rank for key in parts for rank in key.ranks}


@dataclass
class StepParts:
    store: RemoteStore
    sent: dict[int, str] = field(default_factory=dict)  # step → the save this node last sent a part of
    requests: int = 0  # GET and LIST requests this node made of the step's parts, for the benchmarks
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _saves: dict[tuple[str, float], Save | None] = field(default_factory=dict)  # read once per record

    # ---- what S3 holds of a step --------------------------------------------------------------
    def listing(self, step: int) -> Listing:
        """Every part record of `step`, by key (one LIST)."""
        prefix = f"{self.store.step_prefix(step)}{PART_FOLDER}"
        paginator = self.store.s3.get_paginator("list_objects_v2")
        found: list[tuple[PartKey, float]] = []
        try:
            for page in paginator.paginate(Bucket=self.store.bucket, Prefix=prefix):
                self.requests += 1
                for item in page.get("Contents", []):
                    parsed = PartKey.parse(item["Key"][len(self.store.step_prefix(step)):])
                    if parsed is not None:
                        found.append((parsed, item["LastModified"].timestamp()))
        except (ClientError, BotoCoreError) as error:
            raise RemoteStoreError(f"s3://{self.store.bucket}/{prefix}: listing the parts: {error}") from error
        return Listing(found)

    def record(self, step: int, key: PartKey) -> dict[str, Any] | None:
        self.requests += 1
        found = self.store.read_record(keys.checkpoint_prefix(step) + key.name())
        return found if isinstance(found, dict) and isinstance(found.get("files"), dict) else None

    def coordinator_save(self, step: int, listing: Listing | None = None) -> Save | None:
        """The newest save of `step` whose coordinator sent its `.metadata`; None while there is none.
        Read once per record: a save's objects never change."""
        listing = listing or self.listing(step)
        saves = [save for key in listing.newest_metadata() if (save := self._save_of(step, key, listing))]
        return max(saves, key=lambda save: save.saved_at, default=None)

    def _save_of(self, step: int, key: PartKey, listing: Listing) -> Save | None:
        when = next(at for found, at in listing.parts if found == key)
        if (key.name(), when) not in self._saves:
            save = self._read_save(step, key)
            if save is None:
                return None  # removed meanwhile (an abandoned save), or not readable yet: asked again
            self._saves[(key.name(), when)] = save
        return self._saves[(key.name(), when)]

    def _read_save(self, step: int, key: PartKey) -> Save | None:
        record = self.record(step, key)
        if record is None:
            return None
        bodies: dict[str, bytes] = {}
        for stored, entry in record["files"].items():
            name = local_name(stored, entry)
            if name.rsplit("/", 1)[-1] == shards.METADATA:
                if (body := self._object(self.store.step_prefix(step) + stored)) is None:
                    return None
                bodies[name] = body
        if shards.metadata_identity(bodies) != record.get("metadata"):
            return None
        sizes: dict[str, int] = {}
        for name, body in bodies.items():
            folder = name.rsplit("/", 1)[0] if "/" in name else ""
            ends = shards.extents(body)
            if ends is None:
                raise RemoteStoreError(f"s3://{self.store.bucket}/{self.store.step_prefix(step)}{key_name(name)}: "
                                       "not a torch.distributed.checkpoint .metadata (no storage data)",
                                       cause=FailureCause.NO_STORAGE_DATA)
            sizes |= {shards.in_folder(folder, shard): end for shard, end in ends.items()}
        return Save(str(record["metadata"]), key.instance, sizes, float(record.get("saved_at") or 0.0))

    def _object(self, key: str) -> bytes | None:
        self.requests += 1
        try:
            return bytes(self.store.s3.get_object(Bucket=self.store.bucket, Key=key)["Body"].read())
        except ClientError as error:
            if is_missing(error):
                return None
            raise RemoteStoreError(f"s3://{self.store.bucket}/{key}: {error}") from error
        except BotoCoreError as error:
            raise RemoteStoreError(f"s3://{self.store.bucket}/{key}: {error}") from error

    def settlement(self, step: int, identity: str) -> dict[str, Any] | None:
        """The save's settled record ({"outcome": PUBLISHED or ABANDONED, "instance", "settled_at"}), or None."""
        self.requests += 1
        return self.store.read_record(self.settled_name(step, identity))

    # ---- upload ---------------------------------------------------------------------------------
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
            self._send_part(local, step, files, identity, RANKS_TAG, save.covered(set(files)))
        with self._lock:
            self.sent[step] = identity
        log.info("step %d: sent this node's part to s3://%s/%s", step, self.store.bucket, self.store.step_prefix(step))
        return UploadOutcome.PUBLISHED if self.publish_if_whole(step) else UploadOutcome.PART_SENT

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
        carried = self._send_part(local, step, metadata, identity, METADATA_TAG, set(), saved_at=saved_at)
        self._send_part(local, step, rest, identity, COORDINATOR_TAG, save.covered(set(rest)), carried=carried,
                        saved_at=saved_at)
        return identity

    def _send_part(self, local: Path, step: int, files: dict[str, Path], identity: str, tag: str, ranks: set[int],
                   *, saved_at: float = 0.0, carried: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send `files`, each only where no object is yet, then the record naming them and what an earlier
        record of this part `carried`."""
        prefix = self.store.step_prefix(step)
        # Each save's objects under a folder of its own: a late part of one save never lands in another's.
        folder = f"{SAVE_FOLDER}{save_folder(identity)}/"
        stored, left_out = stored_files(files, prefix + folder)
        stored = {folder + key: named for key, named in stored.items()}
        if left_out:
            raise RemoteStoreError(f"step {step}: S3 cannot take {left_out[0]!r} (a key over 1024 bytes)",
                                   cause=FailureCause.LEFT_OUT)
        sent = self.store.send_files(local, stored, prefix, create_only=True) if stored else {}
        entries = {**(carried or {}), **sent}
        record = {"step": step, "name": local.name, "kind": "directory", "block_bytes": BLOCK_BYTES,
                  "coordinator": tag != RANKS_TAG, "complete": tag != METADATA_TAG, "metadata": identity,
                  "files": entries, **({"saved_at": saved_at} if tag != RANKS_TAG else {}),
                  "instance": self.store.instance, "written_at": time.time()}
        key = PartKey(save_folder(identity), tag, frozenset(ranks), self.store.instance)
        # A record exists already only when this node sent it before (its name holds this instance).
        self.store.create_once(keys.checkpoint_prefix(step) + key.name(), record)
        return entries

    # ---- publish --------------------------------------------------------------------------------
    def whole(self, step: int) -> tuple[Save | None, str]:
        """The newest save of `step` and what it lacks ('' when whole), from one listing."""
        listing = self.listing(step)
        save = self.coordinator_save(step, listing)
        if save is None:
            return None, "the part of the node holding its .metadata"
        found = listing.missing_ranks(save)
        if found is None:  # shards whose names do not say their rank: the records say which files are there
            held = {local_name(stored, entry) for key in listing.of_save(save_folder(save.identity))
                    if (record := self.record(step, key)) for stored, entry in record["files"].items()}
            complete = any(key.tag == COORDINATOR_TAG for key in listing.of_save(save_folder(save.identity)))
            lacking = sorted(save.listed - held)
            if not complete:
                return save, "the part of the node holding its .metadata"
            return save, f"the shards {', '.join(lacking[:5])}" if lacking else ""
        complete, missing = found
        if not complete:
            return save, "the part of the node holding its .metadata"
        return save, f"the shards of rank(s) {', '.join(map(str, sorted(missing)))}" if missing else ""

    def publish_if_whole(self, step: int) -> bool:
        """Settle the newest save of `step` once it is whole and publish it (`finish`): True once published.
        Of the nodes that find it whole, and a node abandoning it, one settles it (a conditional write). A
        publish that meets S3 errors is said in a line and left to the next poll (`finish`)."""
        save, lacking = self.whole(step)
        if save is None or lacking:
            return False
        if (latest := self.store.latest_step()) is not None and latest >= step:
            return latest == step  # the node whose part arrived with ours published it
        written = self.store.get_json(keys.checkpoint_prefix(step) + MANIFEST)
        if written is not None and written.get("metadata") not in (None, save.identity):
            # Another save of the step was settled and its manifest written, but latest.json never moved (its
            # publisher lost): that save is the step, whole; it is published, and no other save ever is.
            try:
                return self.finish(step, str(written["metadata"]))
            except RemoteStoreError as error:
                log.warning("step %d: publishing its save settled before failed (%s); retried at the next poll",
                            step, error)
                return False
        if not self.store.create_once(self.settled_name(step, save.identity),
                                      {"outcome": PUBLISHED, "instance": self.store.instance,
                                       "settled_at": time.time()}):
            return False  # another node publishes it, or abandoned it
        try:
            return self.finish(step, save.identity)
        except RemoteStoreError as error:
            log.warning("step %d is whole in S3 and settled for publishing by this node, but S3 failed its "
                        "publish (%s); retried at the next poll", step, error)
            return False

    def finish(self, step: int, identity: str) -> bool:
        """Publish the settled save `identity` of `step`: its MANIFEST.json from its part records (read once;
        kept when a try before wrote it), then latest.json. True once latest.json names `step`; False when a
        newer step is published (this one never will be). S3 failing raises."""
        name = keys.checkpoint_prefix(step) + MANIFEST
        written = self.store.get_json(name)
        if written is None or written.get("metadata") != identity:
            if written is not None:
                raise RemoteStoreError(f"step {step}: its MANIFEST.json names another save of it, settled before",
                                       cause=FailureCause.ANOTHER_SAVE_SETTLED)
            manifest = self._manifest(step, identity)
            if not self.store.create_once(name, manifest) and \
                    (self.store.get_json(name) or {}).get("metadata") != identity:
                raise RemoteStoreError(f"step {step}: its MANIFEST.json names another save of it",
                                       cause=FailureCause.ANOTHER_SAVE_SETTLED)
        published = self.store.publish(step)
        latest = self.store.latest_step()
        if published or latest == step:
            if published:
                self.store.apply_retention(latest=step)
                log.info("step %d is whole in S3: published", step)
            return True
        if latest is None or latest < step:
            raise RemoteStoreError(f"step {step}: latest.json did not move to it", cause=FailureCause.LATEST_NOT_MOVED)
        return False

    def _manifest(self, step: int, identity: str) -> dict[str, Any]:
        """The step's manifest from the part records of one save (the coordinator's files win)."""
        listing = self.listing(step)
        records = [record for key in listing.of_save(save_folder(identity)) if (record := self.record(step, key))
                   and record.get("metadata") == identity]
        files: dict[str, Any] = {}
        for record in sorted(records, key=lambda r: bool(r.get("coordinator"))):
            files.update(record["files"])
        coordinator = next((r for r in records if r.get("coordinator")), None)
        metadata = next((key for key, _ in listing.parts if key.tag == METADATA_TAG and
                         key.save == save_folder(identity)), None)
        save = self._save_of(step, metadata, listing) if metadata is not None else None
        if coordinator is None or save is None or save.identity != identity:
            raise RemoteStoreError(f"step {step}: the coordinator's record of its settled save is gone",
                                   cause=FailureCause.RECORDS_GONE)
        held = {local_name(stored, entry): int(entry["size"]) for stored, entry in files.items()}
        if lacking := sorted(name for name, size in save.sizes.items() if held.get(name) != size):
            raise RemoteStoreError(f"step {step}: its settled save lacks {', '.join(lacking[:5])}: not published",
                                   cause=FailureCause.SETTLED_NOT_WHOLE)
        return {"step": step, "kind": "directory", "name": coordinator["name"], "block_bytes": BLOCK_BYTES,
                "files": files, "written_at": time.time(), "instance": self.store.instance,
                "parts": sorted(str(r.get("instance")) for r in records), "metadata": identity}

    @staticmethod
    def settled_name(step: int, identity: str) -> str:
        return f"{keys.checkpoint_prefix(step)}{SETTLED_PREFIX}{identity}.json"

    def missing_parts(self, step: int) -> str:
        """What `step` still lacks, for a line: the ranks whose shards are not in S3, the part of the node
        holding `.metadata`, or its publish."""
        save, lacking = self.whole(step)
        if save is not None and not lacking:
            settled = self.settlement(step, save.identity)
            if settled is not None and settled.get("outcome") == PUBLISHED:
                return "its publish (MANIFEST.json and latest.json), which S3 has not taken yet"
            return "its settling by the node that publishes it"
        return lacking

    def abandon(self, step: int) -> bool:
        """Remove what S3 holds of the unpublished save of `step` this node sent a part of: only while the
        newest coordinator's record still names that save (another save of the step may have begun), and only
        once this node wins the save's settling over a node publishing it. True when removed."""
        sent = self.sent.get(step)
        current = self.coordinator_save(step)
        if sent is None or current is None or current.identity != sent:
            return False
        if not self.store.create_once(self.settled_name(step, sent), {"outcome": ABANDONED,
                                                                       "instance": self.store.instance,
                                                                       "settled_at": time.time()}):
            return False  # published (or abandoned) by another node meanwhile
        self.store.delete_step(step)
        return True


def _read(path: Path) -> bytes:
    with open_regular(path) as stream:
        return stream.read()
