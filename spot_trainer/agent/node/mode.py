"""A node's mode, chosen once at start: alone (one_node/) a node holds the job's lease and publishes
every checkpoint; several nodes (several_nodes/) train together in rounds, one of them publishing.
The agent's loop asks its mode what to do and never which mode it is in; each mode builds itself from
what the agent hands every mode (`NodeSetup`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from ...storage.saves.layouts import Checkpoint
from ...storage.steps.other_regions import OtherRegions
from ...storage.steps.remote import RemoteStore
from ..instance.config import AgentConfig
from ..instance.own_group import OwnGroup
from ..records.telemetry import RunTelemetry
from ..watches.notice_watch import NoticeWatch
from .endings import Endings
from .restore import Restore
from .uploads import NodeUploads

AnyRestore = TypeVar("AnyRestore", bound=Restore)


@dataclass(frozen=True)
class NodeSetup:
    """What the agent hands a node's mode to build itself from, whichever mode it is."""

    config: AgentConfig
    store: RemoteStore
    telemetry: RunTelemetry
    notices: NoticeWatch
    stop_requested: threading.Event
    group: OwnGroup  # this instance in its Auto Scaling group
    elsewhere: OtherRegions | None  # a job of several regions: its buckets in the others

    def restore(self, kind: type[AnyRestore]) -> AnyRestore:
        """Where the command starts from, as the mode's `kind` of restore reads it."""
        return kind(Path(self.config.checkpoint_dir), self.store, self.telemetry,
                    builtin=self.config.program.builtin, elsewhere=self.elsewhere)


@dataclass(frozen=True)
class Launch:
    """How the mode starts the command: its argv and the mode's part of the command's environment."""

    argv: list[str]
    env: dict[str, str]


@dataclass(frozen=True)
class Polled:
    """What one poll of a running command found."""

    newest: Checkpoint | None  # the newest complete checkpoint on this disk
    gave_up: bool = False  # the mode gives up (several nodes: the round's restart budget is spent): stop, fail


class NodeMode(Protocol):
    @property
    def restore(self) -> Restore: ...

    @property
    def endings(self) -> Endings: ...

    @property
    def watches_progress(self) -> bool:
        """Whether a command that shows no progress for the stall limit is taken for hung."""

    @property
    def failures(self) -> int:
        """This node's failed runs counted against the restart budget."""

    def run(self, train: Callable[[], int]) -> int:
        """Train (`train`) with what the mode needs to hold the job; the agent's exit code."""

    def lease_lost(self) -> bool:
        """Another agent took the job over: nothing more may be published."""

    def uploads(self, uploaded_step: int | None) -> NodeUploads:
        """What this node sends to S3, from `uploaded_step` (the step S3 holds) on."""

    def launch(self) -> Launch:
        """The command's argv and environment for its next start."""

    def poll(self, uploads: NodeUploads, *, exited: bool) -> Polled:
        """Each poll of the running command: its newest checkpoint offered for upload as the mode wants."""

    def failed(self, reason: str, code: int) -> bool:
        """The command failed with `code`: recorded, and True once the restart budget is spent."""

    def gave_up(self) -> int:
        """The restart budget is spent: the job fails for good; the agent's exit code."""

    def next_start(self, uploads: NodeUploads, resume_from: Checkpoint | None) -> Checkpoint | None:
        """After a failed run: the checkpoint the next start resumes from, made ready."""

    def finished(self, uploads: NodeUploads, newest: int | None) -> int:
        """The command exited 0 and `newest` is the step in S3: how this node's part in the job ends."""

    def saved_elsewhere(self) -> bool:
        """The checkpoints are written on another node, and S3 shows one: no warning that none appears here."""
