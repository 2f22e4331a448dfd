"""The settle/publish protocol of a sharded step (step_parts.py): whoever finds a save whole settles it (a
conditional write one node wins) and becomes its publisher: it writes the step's MANIFEST.json from the part
records and moves latest.json (the store's conditional publish, which never goes back). A publish that meets S3
errors is retried by the publisher, and by every node that sent a part once the settling is
FINISH_TAKEOVER_SECONDS old (`finish`), until the step is published or a newer one is. A node whose part's save
is not whole PARTS_ARRIVAL_SECONDS later abandons it (`abandon`: settled as abandoned, its objects removed)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..failure_causes import FailureCause
from ..files.checksums import BLOCK_BYTES
from ..s3 import job_keys as keys
from ..s3.job_keys import MANIFEST
from ..s3.key_names import local_name
from .part_keys import PartTag
from .part_records import PartRecords
from .remote import RemoteStoreError

log = logging.getLogger(__name__)

PARTS_ARRIVAL_SECONDS = 120.0  # from the coordinator's part in S3 to the last node's part
FINISH_TAKEOVER_SECONDS = 30.0  # a settled save its publisher has not published by then: any node finishes it


class SaveOutcome(StrEnum):
    """How a save was settled (its SETTLED record's "outcome")."""

    PUBLISHED = "published"  # its settler publishes it
    ABANDONED = "abandoned"  # not whole in time: its objects are removed


@dataclass
class SettledSteps(PartRecords):
    sent: dict[int, str] = field(default_factory=dict)  # step → the save this node last sent a part of

    @staticmethod
    def settled_name(step: int, identity: str) -> str:
        return keys.settled_record(step, identity)

    def settle(self, step: int, identity: str, outcome: SaveOutcome) -> bool:
        """Settle the save (a conditional write): True for the one node that does."""
        return self.store.create_once(self.settled_name(step, identity), {
            "outcome": outcome, "instance": self.store.instance, "settled_at": time.time()})

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
        if not self.settle(step, save.identity, SaveOutcome.PUBLISHED):
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
        records = [record for key in listing.of_save(keys.save_folder(identity))
                   if (record := self.record(step, key)) and record.get("metadata") == identity]
        files: dict[str, Any] = {}
        for record in sorted(records, key=lambda r: bool(r.get("coordinator"))):
            files.update(record["files"])
        coordinator = next((r for r in records if r.get("coordinator")), None)
        metadata = next((key for key, _ in listing.parts if key.tag == PartTag.METADATA and
                         key.save == keys.save_folder(identity)), None)
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

    def missing_parts(self, step: int) -> str:
        """What `step` still lacks, for a line: the ranks whose shards are not in S3, the part of the node
        holding `.metadata`, or its publish."""
        save, lacking = self.whole(step)
        if save is not None and not lacking:
            settled = self.settlement(step, save.identity)
            if settled is not None and settled.get("outcome") == SaveOutcome.PUBLISHED:
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
        if not self.settle(step, sent, SaveOutcome.ABANDONED):
            return False  # published (or abandoned) by another node meanwhile
        self.store.delete_step(step)
        return True
