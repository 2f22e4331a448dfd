"""Several nodes as one (torchrun elastic): every node trains and none holds the lease (the rendezvous and
step fencing replace it). In each round the node holding group rank 0 publishes (round_part.py), every
node sends its own shards (uploads.py), a failed round counts against the restart budget only when the
next round's world is the same (round_failures.py), a node joins the next round from the step published
in S3 (world.py), and a node that does not publish leaves the job's end to the publisher (endings.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...distributed.rounds import ROUND_FILE_ENV, ROUND_RESUME_ENV
from ...storage.saves.layouts import Checkpoint
from ...storage.steps.other_regions import JOB_BUCKETS_ENV, REGION_ENV
from ...storage.steps.remote import RemoteStore
from ...storage.steps.step_parts import StepParts
from ..instance.config import AgentConfig
from ..node.keep_outputs import keep_final_outputs
from ..node.mode import Launch, Polled
from ..node.uploads import NodeUploads
from ..program.command import program_argv
from ..records.telemetry import RunTelemetry
from .endings import SeveralEndings
from .restore import SeveralRestore
from .round_part import RoundPart
from .sharded_saves import ShardedSaves
from .torchrun import torchrun_argv
from .uploads import SeveralUploads
from .world import World


@dataclass
class SeveralNodes:
    config: AgentConfig
    store: RemoteStore
    telemetry: RunTelemetry
    stop_requested: threading.Event
    world: World  # the peers and the job's end as they record it
    rounds: RoundPart
    restore: SeveralRestore
    endings: SeveralEndings
    # Failed runs are counted by round (rounds.failures), for the world they failed in.
    failures: int = 0

    @property
    def watches_progress(self) -> bool:
        """A node that does not publish sees no progress of its own, and a world waiting for min_nodes is
        no hang: the stall alarm still watches the job."""
        return False

    def run(self, train: Callable[[], int]) -> int:
        return train()  # every node trains: the rendezvous and step fencing replace the lease

    def lease_lost(self) -> bool:
        return False

    def uploads(self, uploaded_step: int | None) -> NodeUploads:
        config = self.config
        sharded = ShardedSaves(StepParts(self.store), Path(config.checkpoint_dir), self.telemetry.log,
                               self.telemetry.event)
        return SeveralUploads(store=self.store, restore=self.restore, rounds=self.rounds, telemetry=self.telemetry,
                              sharded=sharded, uploaded_step=uploaded_step, stop_requested=self.stop_requested,
                              grace_seconds=config.grace_seconds, poll_seconds=config.poll_seconds)

    def launch(self) -> Launch:
        """torchrun, with the round file the launcher writes once a round forms."""
        worker = program_argv(self.config.program, self.config.train_args)
        argv = torchrun_argv(self.config, self.world.local_addr(), worker)
        self.rounds.round_file.unlink(missing_ok=True)
        # torchrun gives each rank RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT.
        env = {ROUND_FILE_ENV: str(self.rounds.round_file)}
        if self.config.job_buckets:  # a round may start from a step another region's bucket holds
            env |= {JOB_BUCKETS_ENV: self.config.job_buckets, REGION_ENV: self.config.region}
        if not self.config.program.builtin:  # the built-in trainer agrees on a step by itself
            env[ROUND_RESUME_ENV] = "1"
        return Launch(argv, env)

    def poll(self, uploads: NodeUploads, *, exited: bool) -> Polled:
        """The round read once per poll: the newest checkpoint goes up while this node publishes, or when it
        hands a finished round over; the round is said once, and the restart budget judged as it forms."""
        round_ = self.rounds.current()
        handover = self.rounds.handover(round_)
        newest = uploads.offer_newest(writer_done=exited or handover,
                                      publishes=self.rounds.publishes(round_) or handover)
        self.rounds.say(round_)
        return Polled(newest, gave_up=self.rounds.exhausted_when_formed(round_))

    def failed(self, reason: str, code: int) -> bool:
        return self.rounds.exhausted_by_failure(reason, code)

    def gave_up(self) -> int:
        return self.endings.failed(self.rounds.failures.reason, self.rounds.failures.count)

    def next_start(self, uploads: NodeUploads, resume_from: Checkpoint | None) -> Checkpoint | None:
        """The next round resumes from the step published in S3, fetched here."""
        uploads.settle_parts()  # before the next round sets this disk's newer saves aside
        return self.world.catch_up(uploads.uploader, self.telemetry.group_stop_step, self.rounds.publishes(),
                                   self.restore)

    def finished(self, uploads: NodeUploads, newest: int | None) -> int:
        """DONE once the publisher's final checkpoint is in S3."""
        if not self.rounds.publishes():
            uploads.settle()  # its own shards of the final save: without them it is never whole
            return self.endings.after_the_publisher()
        if missing := uploads.final_missing(newest):
            return self.endings.failed(missing, self.failures, keep_instance=True)
        newest = self.store.latest_step()  # rank 0 may have written on another node
        keep_final_outputs(self.telemetry, Path(self.config.checkpoint_dir))  # one node's, not each rank's parts
        return self.endings.done(newest)

    def saved_elsewhere(self) -> bool:
        return self.store.latest_step() is not None  # rank 0 writes on another node, and S3 shows it has saved
