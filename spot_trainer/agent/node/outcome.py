"""How one run of the training command ended, as the agent's loop reads it to decide what comes next."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    EXITED = "exited"  # the command ended by itself: its exit code says finished or failed
    STOPPED = "stopped"  # a notice or a stop request stopped it: the reason says which
    LOST_LEASE = "lost-lease"  # another agent took the job over: nothing more may be published
    HUNG = "hung"  # no progress for the stall limit (hang_watch.py)
    OVER_BUDGET = "over budget"  # the spending cap is reached (budget_watch.py)
    GAVE_UP = "gave up"  # the node's mode gave up (several nodes: the round's restart budget is spent)


@dataclass(frozen=True)
class RunEnd:
    outcome: Outcome
    code: int  # the command's exit code; -1 when the agent stopped it without waiting for one
    reason: str = ""  # STOPPED: the notice or request that stopped it
