"""The round of the rendezvous a node is in: written by the launcher each time a round forms, read by
the node's agent. It answers the two questions only the rendezvous knows for certain: which node
publishes (the one holding group rank 0, so global rank 0), and whether the world changed between
two rounds (its nodes differ). Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

ROUND_FILE_ENV = "RENDEZVOUS_ROUND_FILE"  # where the launcher writes this node's record
# "1": each round resumes from one step published in S3 (spot_trainer.distributed.round_start)
ROUND_RESUME_ENV = "RENDEZVOUS_RESUME_FROM_S3"


@dataclass(frozen=True)
class Round:
    number: int  # the rendezvous' own round counter
    group_rank: int  # this node's rank among the round's nodes
    nodes: tuple[str, ...]  # the round's nodes by address, sorted

    @property
    def publishes(self) -> bool:
        """Group rank 0 holds global rank 0: the rank every framework saves whole checkpoints from."""
        return self.group_rank == 0

    def line(self) -> str:
        return (f"round {self.number}: {len(self.nodes)} node(s), this one group rank {self.group_rank}"
                f"{' (publishes)' if self.publishes else ''}")


def write_round(path: Path, round_: Round) -> None:
    """Atomically (written aside, renamed): the agent never reads half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    aside.write_text(json.dumps(asdict(round_)))
    os.replace(aside, path)


def read_round(path: Path) -> Round | None:
    """The record, or None when no round has formed yet (or the record is not one)."""
    try:
        raw = json.loads(path.read_text())
        return Round(number=int(raw["number"]), group_rank=int(raw["group_rank"]),
                     nodes=tuple(str(n) for n in raw["nodes"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
