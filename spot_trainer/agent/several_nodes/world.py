"""Several nodes as one (torchrun elastic): what a node's agent does beyond a single node's
lifecycle. Every node trains and none holds the lease; rank 0's node writes the checkpoints, so a
node joining a new round first fetches what another node may have published, and a node that is
told to leave after a peer finished the job, or gave up on it, must not record that job as interrupted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...storage.record_kinds import JOB_ENDINGS, JobState
from ...storage.saves import layouts
from ...storage.saves.layouts import Checkpoint
from ...storage.steps.other_regions import OtherRegions
from ...storage.steps.remote import RemoteStore, RemoteStoreError
from ...storage.steps.uploader import CheckpointUploader
from ..instance.config import AgentConfig
from ..instance.imds import ImdsClient
from ..node.restore import Restore
from ..records import status as states


@dataclass(frozen=True)
class AwaitedEnd:
    """How a wait for the publisher's end of the job ended: its record (which decides), a notice here, or
    neither in time."""

    ending: dict[str, Any] | None = None
    notice: str | None = None


@dataclass
class World:
    config: AgentConfig
    store: RemoteStore
    imds: ImdsClient
    stop_requested: threading.Event
    log: Callable[[str], None]
    elsewhere: OtherRegions | None = None  # a job of several regions: its buckets in the others

    def local_addr(self) -> str:
        """The address peers reach this node at: the instance's private IPv4 (each loopback address
        of its own in the local spot cloud)."""
        return self.config.local_addr or self.imds.local_ipv4()

    def ended_by_a_peer(self, since: float) -> dict[str, Any] | None:
        """The `done`, `failed` or `budget` event of a peer that ended the job, if one did since this agent
        started.

        Several nodes finish together, and the first to finish (or to give up) scales the group to zero:
        the others then get a scale-in notice, which is not an interruption. The peer's event says so for
        sure: every node writes the one status record, and a node's progress published a moment after
        the peer's DONE or FAILED hides it."""
        if endings := self.store.events(*JOB_ENDINGS, since=since):
            return endings[-1]
        status = self.store.read_record(states.STATUS_NAME) or {}
        if status.get("state") in (JobState.DONE, JobState.FAILED):
            return {"kind": str(status["state"]).lower(), "reason": status.get("reason", ""),
                    "step": status.get("checkpoint_step")}
        return None

    def await_ending(self, since: float, bound_seconds: float, notice: Callable[[], str | None]) -> AwaitedEnd:
        """Wait up to `bound_seconds` for a peer to record the job's end (`ended_by_a_peer`), answering a
        notice or a stop request here at once. The notice is read first: a peer records its end before it
        scales the group in, so a scale-in it caused comes with its record."""
        deadline = time.monotonic() + bound_seconds
        while True:
            reason = notice() or ("agent asked to stop" if self.stop_requested.is_set() else None)
            try:
                ending = self.ended_by_a_peer(since)
            except RemoteStoreError:  # S3 having a bad minute: asked again at the next poll, within the bound
                ending = None
            if ending is not None or reason is not None:
                return AwaitedEnd(ending=ending, notice=reason)
            if (left := deadline - time.monotonic()) <= 0:
                return AwaitedEnd()
            self.stop_requested.wait(min(self.config.poll_seconds, left))

    def catch_up(self, uploader: CheckpointUploader, group_stop_step: int | None, published: bool,
                 restore: Restore) -> Checkpoint | None:
        """Before this node joins a new round, its disk gets the step published in S3, the one every
        node resumes from. When the world stopped together to save (at `group_stop_step`), wait up to
        the grace period for that checkpoint to reach S3, so the round loses no step. What this disk
        holds beyond it goes aside: on the node that `published` in the last round, a checkpoint whose
        upload failed; on any other, the parts its ranks wrote (HF's and Lightning's non-zero ranks
        write checkpoints without the model), which are never whole. With `restore.before_a_round`, of a
        sharded step all but its shards: the round brings each node its own ranks' share as it forms. In a
        job of several regions the published step may lie in another region's bucket, until one is
        published here."""
        directory, store = Path(self.config.checkpoint_dir), self.store
        deadline = time.monotonic() + self.config.grace_seconds
        while True:
            remote = store.latest_step()
            if group_stop_step is None or (remote is not None and remote >= group_stop_step):
                break
            if time.monotonic() >= deadline or self.stop_requested.wait(self.config.poll_seconds):
                break
        if (away := self.elsewhere.newest_above(remote) if self.elsewhere else None) is not None:
            store, remote = away.store, away.step  # nothing published here since the job moved here
        if aside := layouts.set_aside_above(directory, remote if published else None):
            self.log(f"set aside {', '.join(aside)} (as {layouts.UNVERIFIED_PREFIX}<name>): not the step "
                     f"published in S3 ({remote}), which every node of the next round resumes from")
        local = restore.newest(writer_done=True)
        if remote is not None and (local is None or remote > local.step):
            if (restored := store.restore_checkpoint(directory, remote, restore.before_a_round)) is not None:
                uploader.already_in_s3(restored.step)
                self.log(f"fetched {restored.path.name} from S3 for the next round")
                restore.prepare(restored)
                return restored
        return local
