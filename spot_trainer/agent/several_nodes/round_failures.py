"""Several nodes: when a failed round counts against the restart budget.

Any node's loss ends the round for all (the survivors' ranks fail in their next collective), so a
failed round alone says nothing. The next round does: the rendezvous forms it from the nodes that are
there, and if they are not the failed round's nodes, a peer left or joined and the failure was the
world changing, not the command. Only failures that repeat in the same world count; the job fails
once `budget` of them have, when the next round forms in that world again, or at once when torchrun
fails again before any round forms.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

World = tuple[str, ...] | None  # a round's nodes by address; None when no round formed


class RoundVerdict(Enum):
    """What a failed round turned out to be, once known (None: not known yet, or nothing failed)."""

    CHANGED = "changed"  # the next round's nodes differ: a peer left or joined, the failure is forgiven
    EXHAUSTED = "exhausted"  # the same world failed its whole budget: the job fails


@dataclass
class RoundFailures:
    budget: int
    count: int = 0  # failures counted in `world`
    world: World = None
    pending: bool = False  # the last failure awaits the next round's nodes
    reason: str = ""

    def failed(self, world: World, reason: str) -> RoundVerdict | None:
        """A round of `world` ended with a failure. EXHAUSTED when no round formed since the last one
        and the budget is spent; otherwise the next round decides."""
        if self.pending and self.count >= self.limit:
            return RoundVerdict.EXHAUSTED
        if self.count and world != self.world:
            self.count = 0
        self.count, self.world, self.reason, self.pending = self.count + 1, world, reason, True
        return None

    def round_formed(self, world: World) -> RoundVerdict | None:
        """A new round formed with these nodes: CHANGED (the failures were the world changing),
        EXHAUSTED (the same world failed `budget` times), or None."""
        if not self.pending:
            return None
        self.pending = False
        if world != self.world:
            self.count = 0
            return RoundVerdict.CHANGED
        return RoundVerdict.EXHAUSTED if self.count >= self.limit else None

    @property
    def limit(self) -> int:
        return max(1, self.budget)
