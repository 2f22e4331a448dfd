"""A sharded step's part records as S3 holds them (step_parts.py): one listing, each record read, the save its
coordinator's `.metadata` describes, whether a save is whole and how it was settled."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..failure_causes import FailureCause
from ..s3 import job_keys as keys
from ..s3.conditional import is_missing
from ..s3.key_names import key_name, local_name
from ..saves import shards
from .part_keys import PartKey, PartTag
from .part_listing import Listing, Save
from .remote import RemoteStore, RemoteStoreError

NO_COORDINATOR = "the part of the node holding its .metadata"


@dataclass
class PartRecords:
    store: RemoteStore
    requests: int = 0  # GET and LIST requests this node made of the step's parts, for the benchmarks
    _saves: dict[tuple[str, float], Save | None] = field(default_factory=dict)  # read once per record

    def listing(self, step: int) -> Listing:
        """Every part record of `step`, by key (one LIST)."""
        prefix = f"{self.store.step_prefix(step)}{keys.PARTS}"
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
        """The save's settled record ({"outcome": a SaveOutcome, "instance", "settled_at"}), or None."""
        self.requests += 1
        return self.store.read_record(keys.settled_record(step, identity))

    def whole(self, step: int) -> tuple[Save | None, str]:
        """The newest save of `step` and what it lacks ('' when whole), from one listing."""
        listing = self.listing(step)
        save = self.coordinator_save(step, listing)
        if save is None:
            return None, NO_COORDINATOR
        found = listing.missing_ranks(save)
        if found is None:  # shards whose names do not say their rank: the records say which files are there
            held = {local_name(stored, entry) for key in listing.of_save(keys.save_folder(save.identity))
                    if (record := self.record(step, key)) for stored, entry in record["files"].items()}
            complete = any(key.tag == PartTag.COORDINATOR for key in listing.of_save(keys.save_folder(save.identity)))
            lacking = sorted(save.listed - held)
            if not complete:
                return save, NO_COORDINATOR
            return save, f"the shards {', '.join(lacking[:5])}" if lacking else ""
        complete, missing = found
        if not complete:
            return save, NO_COORDINATOR
        return save, f"the shards of rank(s) {', '.join(map(str, sorted(missing)))}" if missing else ""
