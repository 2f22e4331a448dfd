"""The key grammar of a sharded step's part records (step_parts.py): what a record's key says of the save, the
node and the ranks it covers, spelt in job_keys.py.

    parts/<save>/metadata/<instance>.json               the coordinator's first record: its `.metadata` files
    parts/<save>/coordinator.<ranks>/<instance>.json    the coordinator's complete record
    parts/<save>/ranks.<ranks>/<instance>.json          any other node's record

`<ranks>` runs of ranks, '0-3_8' for 0, 1, 2, 3 and 8.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..s3 import job_keys as keys


class PartTag(StrEnum):
    METADATA = "metadata"  # the coordinator's `.metadata` files, sent first so other nodes may start
    COORDINATOR = "coordinator"  # the coordinator's complete part: its shards and rank 0's own files
    RANKS = "ranks"  # any other node's shards


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
    """What a part record's key says: its save (job_keys.save_folder), its tag, the ranks whose every listed
    shard it holds, and the node that sent it."""

    save: str
    tag: PartTag
    ranks: frozenset[int]
    instance: str

    @staticmethod
    def parse(relative: str) -> PartKey | None:
        """The key within its step's prefix; None for any other object."""
        parts = relative.split("/")
        if len(parts) != 4 or parts[0] + "/" != keys.PARTS or not parts[3].endswith(".json"):
            return None
        tag, _, ranks = parts[2].partition(".")
        try:
            return PartKey(parts[1], PartTag(tag), frozenset(ranks_of_text(ranks)), parts[3][:-len(".json")])
        except ValueError:
            return None

    def name(self) -> str:
        """The key within its step's prefix."""
        tag = self.tag + (f".{ranks_text(set(self.ranks))}" if self.tag != PartTag.METADATA else "")
        return keys.part_record(self.save, tag, self.instance)
