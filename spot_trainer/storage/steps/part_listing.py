"""What S3 holds of a sharded step, as read: a save as its coordinator's `.metadata` describes it, and one listing
of the step's part records (part_keys.py), which tells whether a save is whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..s3 import job_keys as keys
from ..saves import shards
from .part_keys import PartKey, PartTag

# A node's shards belong to a save only if written before its .metadata (DCP writes .metadata once every
# rank has written): a shard written later is a newer save's. Nodes' clocks agree within this (on EC2,
# the Amazon Time Sync Service keeps them within a millisecond or so).
CLOCK_ALLOWANCE_SECONDS = 1.0


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
        found = [(when, key) for key, when in self.parts if key.tag == PartTag.METADATA]
        last = max((when for when, _ in found), default=None)
        return [key for when, key in found if when == last]

    def of_save(self, save: str) -> list[PartKey]:
        return [key for key, _ in self.parts if key.save == save and key.tag != PartTag.METADATA]

    def missing_ranks(self, save: Save) -> tuple[bool, set[int]] | None:
        """(the coordinator's complete record is there, the ranks no record covers); None when the ranks
        cannot be told from the names."""
        wanted = save.ranks()
        if wanted is None:
            return None
        parts = self.of_save(keys.save_folder(save.identity))
        complete = any(key.tag == PartTag.COORDINATOR and key.instance == save.coordinator for key in parts)
        return complete, wanted - {rank for key in parts for rank in key.ranks}
