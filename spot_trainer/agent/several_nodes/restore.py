"""Where several nodes start from: one published step, never one node's disk."""

from __future__ import annotations

from dataclasses import dataclass

from ...storage.saves import layouts
from ...storage.saves.layouts import Checkpoint
from ...storage.saves.shards import BEFORE_A_ROUND, NodeRanks
from ..node.restore import Restore


@dataclass
class SeveralRestore(Restore):
    """Several nodes resume from one published step, never from one node's disk: what it holds may be
    another rank's part."""

    @property
    def before_a_round(self) -> NodeRanks | None:
        """For the user's own command, all of a sharded step but its shards, since each round brings every
        node its own ranks' share as it forms (round_start.py); the built-in trainer gets all of it."""
        return None if self.builtin else BEFORE_A_ROUND

    def newest_at_start(self) -> Checkpoint | None:
        """None: what this disk holds goes aside, and the step published in S3 is restored."""
        if aside := layouts.set_aside_above(self.directory, None):
            self.telemetry.log(f"set aside {', '.join(aside)} (as {layouts.UNVERIFIED_PREFIX}<name>): several nodes "
                               "resume from the step published in S3, never from what one node's disk holds")
        return None
