"""This node's part in a round of several nodes (torchrun elastic): which round it is in, whether it
publishes, and whether a failed round counts against the restart budget (a single node has no rounds,
and always publishes)."""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ...distributed.rounds import Round, read_round
from ...storage.record_kinds import EventKind
from ..records.telemetry import RunTelemetry
from .round_failures import RoundFailures, RoundVerdict


def default_round_file(pid: int) -> Path:
    """Several nodes: where the launcher records the round this node is in (spot_trainer.distributed.rounds)."""
    return Path(tempfile.gettempdir()) / f"spot-trainer-{pid}-round.json"


@dataclass
class RoundPart:
    failures: RoundFailures
    telemetry: RunTelemetry
    stop_requested: threading.Event
    poll_seconds: float  # the base of the back-off before the next round
    # Written by the launcher, read each poll.
    round_file: Path = field(default_factory=lambda: default_round_file(os.getpid()))
    said: Round | None = None  # the last round formed, once said

    def current(self) -> Round | None:
        """The round this node is in, as the launcher last recorded it."""
        return read_round(self.round_file)

    def publishes(self, round_: Round | None = None) -> bool:
        """One node publishes each step: the node holding group rank 0 in the current round (its global
        rank 0 is where every framework saves whole). Before a round forms, none."""
        round_ = round_ or self.current()
        return round_ is not None and round_.publishes

    def handover(self, round_: Round | None) -> bool:
        """A new round has just formed after one this node published: torchrun has stopped the last
        round's workers, so what they left is finished, and this node uploads it (every node of the new
        round waits for it in S3 before resuming: distributed/round_start.py)."""
        previous = self.said
        return round_ is not None and previous is not None and round_ != previous and previous.publishes

    def say(self, round_: Round | None) -> None:
        """Once per round formed: its size and whether this node publishes."""
        if round_ is not None and round_ != self.said:
            self.said = round_
            self.telemetry.log(round_.line())
            self.telemetry.event(EventKind.ROUND, number=round_.number, nodes=len(round_.nodes),
                                 group_rank=round_.group_rank)

    def exhausted_when_formed(self, round_: Round | None) -> bool:
        """Each poll: once the round after a failure forms, was it the world changing, or the same world
        failing its whole budget?"""
        if round_ is None:
            return False
        verdict = self.failures.round_formed(round_.nodes)
        if verdict is RoundVerdict.CHANGED:
            self.telemetry.log(f"the world changed ({round_.line()}): the last round ended with a peer leaving or "
                               "joining, not a failure of the command")
        elif verdict is RoundVerdict.EXHAUSTED:
            self.telemetry.log(f"training failed {self.failures.count} time(s) in the same world of "
                               f"{len(round_.nodes)} node(s): {self.failures.reason}")
        return verdict is RoundVerdict.EXHAUSTED

    def exhausted_by_failure(self, reason: str, code: int) -> bool:
        """A round failed. Whether it counts is decided when the next round forms (round_failures.py);
        True when no round formed since the last failure and the budget is spent, else this node backs
        off and joins the next round."""
        round_ = self.current()
        failures = self.failures
        if failures.failed(round_.nodes if round_ else None, reason) is RoundVerdict.EXHAUSTED:
            return True
        self.telemetry.event(EventKind.ROUND_ENDED, exit_code=code, reason=reason, failures=failures.count)
        self.telemetry.update(failures=failures.count)
        self.telemetry.log(f"the round ended: {reason}; joining the next round (failed rounds in a world of "
                           f"{len(failures.world or ())} node(s): {failures.count}/{failures.budget}, "
                           "forgiven if the next round's nodes differ)")
        self.stop_requested.wait(min(60.0, self.poll_seconds * 2 ** (failures.count - 1)))
        return False
