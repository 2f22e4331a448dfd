"""The supervisor on each instance: lease → restore → run the command → upload → stop cleanly.

One agent per job trains at a time (the S3 lease). While the command runs, the agent renews the
lease, watches IMDS for an interruption notice, uploads each new checkpoint in the background and
keeps status.json, the event log, CloudWatch Logs and metrics current. On a notice it stops the
command with the configured signal, waits for its emergency checkpoint, uploads it and hands the
lease back, so the next instance resumes without losing a completed step.

`Agent` keeps the loop; its rooms own the rest: where the command starts from (restore.py), how it
is started (command_start.py) and stopped (stopping.py), what this node sends to S3 (uploads.py), its
part in a round of several nodes (round_part.py) and how its part in the job ends (endings.py).
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..costs.spot_prices import SpotPriceSource
from ..signal_connector import SignalConnector
from ..storage.layouts import Checkpoint
from ..storage.lease import Lease
from ..storage.record_kinds import EventKind, JobState
from ..storage.remote import RemoteStore
from ..storage.step_parts import StepParts
from . import status as states
from .aws_clients import AutoScalingClient
from .budget_watch import BudgetWatch, budget_watch_for
from .cloudwatch import CloudWatchSink
from .command import CommandProcess
from .command_start import start_command
from .config import AgentConfig, known_total_steps
from .deadline_watch import DeadlineWatch, deadline_watch_for
from .endings import Endings
from .hang_watch import HangWatch
from .imds import ImdsClient
from .keep_outputs import keep_final_outputs
from .lease_keeper import LeaseKeeper
from .notice_watch import NoticeWatch
from .notify import Notifier, SnsClient
from .outcome import Outcome, RunEnd
from .own_group import OwnGroup
from .restore import Restore
from .round_failures import RoundFailures
from .round_part import RoundPart
from .save_watch import SaveWatch
from .sharded_saves import ShardedSaves
from .status import JobStatus, StatusReporter, utc_text
from .stopping import Stopping
from .telemetry import RunTelemetry
from .uploads import NodeUploads
from .world import World


class AgentError(RuntimeError):
    """The agent cannot go on (S3 unreachable after retries, lease lost); the message says why."""


@dataclass
class Clients:
    """Everything the agent talks to; tests pass clients pointed at moto and a fake IMDS."""

    store: RemoteStore
    lease: Lease
    imds: ImdsClient
    autoscaling: AutoScalingClient
    cloud: CloudWatchSink | None
    sns: SnsClient | None = None
    prices: SpotPriceSource | None = None  # spot prices for the spending cap


@dataclass
class Agent:
    config: AgentConfig
    clients: Clients
    instance_id: str
    stop_requested: threading.Event = field(default_factory=threading.Event)
    started_at: float = field(default_factory=time.time)
    telemetry: RunTelemetry = field(init=False)
    world: World = field(init=False)  # several nodes: the peers and the job's end as they record it
    rounds: RoundPart = field(init=False)
    restore: Restore = field(init=False)
    endings: Endings = field(init=False)
    stopping: Stopping = field(init=False)
    newest_on_disk: int | None = None  # the newest complete checkpoint seen here, for the instance record
    _keeper: LeaseKeeper | None = None
    _notices: NoticeWatch = field(init=False)
    _deadline: DeadlineWatch | None = None
    _budget: BudgetWatch | None = None
    _hang: HangWatch = field(init=False)

    def __post_init__(self) -> None:
        config, clients = self.config, self.clients
        self.telemetry = RunTelemetry(store=clients.store, cloud=clients.cloud)
        # Several nodes: a node that does not publish sees no progress of its own, and a world waiting
        # for min_nodes is no hang; the stall alarm still watches the job.
        watched = config.restart_on_stall and not config.distributed
        self._hang = HangWatch(config.stall_minutes * 60 if watched else 0)
        self._notices = NoticeWatch(clients.imds, config.react_to_rebalance, self.log)
        self.stopping = Stopping(config.stop_signal, config.grace_seconds, self._notices, self.telemetry)
        if config.notify_topic and clients.sns is not None:
            self.telemetry.notifier = Notifier(config.notify_topic, clients.sns, config.job, self.log)
        self.world = World(config, clients.store, clients.imds, self.stop_requested, self.log)
        self.rounds = RoundPart(config.distributed, RoundFailures(config.restart_budget), self.telemetry,
                                self.stop_requested, config.poll_seconds)
        self.restore = Restore(Path(config.checkpoint_dir), clients.store, self.telemetry,
                               distributed=config.distributed, builtin=self._builtin)
        group = OwnGroup(config.asg_name, config.lifecycle_hook, self.instance_id, clients.imds,
                         clients.autoscaling, self.log)
        self.endings = Endings(config, clients.store, self.telemetry, group, self.world, self._notices,
                               self.stop_requested, self.started_at, self.instance_id)

    # ---- entry point --------------------------------------------------------------------------
    def run(self) -> int:
        self.log(f"agent on {self.instance_id} for job {self.config.job} (s3://{self.config.bucket})")
        self._forward_bootstrap_log()
        if self.config.distributed:  # every node trains: the rendezvous and step fencing replace the lease
            return self._run_holding_lease()
        if not self._wait_for_lease():
            self.log("stopped while waiting for the job lease; nothing to do")
            self.endings.group.release()  # a standby chosen for scale-in has nothing to save
            return 0
        self._keeper = LeaseKeeper(self.clients.lease, self.config.lease_ttl_seconds, self.log).start()
        try:
            return self._run_holding_lease()
        finally:
            self._keeper.release()

    def _run_holding_lease(self) -> int:
        store, config = self.clients.store, self.config
        reporter = self.telemetry.reporter = StatusReporter(
            JobStatus.carried_over(store.read_record(states.STATUS_NAME), config.job, self.instance_id),
            publish=self.telemetry.publish_status,
            interval_seconds=config.status_interval_seconds,
        )
        reporter.update(state=JobState.RESTORING, total_steps=known_total_steps(config) or None)
        self.telemetry.event(EventKind.START, attempt=reporter.status.attempt + 1)
        self._deadline = deadline_watch_for(config, self.clients.autoscaling, self.telemetry,
                                            reporter.status.first_started_at or time.time())
        self._budget = budget_watch_for(config, store, self.clients.prices, self.telemetry)
        if self._budget is not None and (why := self._budget.reason_to_stop()):
            return self.endings.stopped_by_budget(why, store.latest_step())  # a cap not raised: no command to start
        start = self.restore.at_start()
        sharded = ShardedSaves(StepParts(store), Path(config.checkpoint_dir), self.log,
                               self.telemetry.event) if config.distributed else None
        uploads = NodeUploads(store=store, lease=None if config.distributed else self.clients.lease,
                              restore=self.restore, rounds=self.rounds, telemetry=self.telemetry, sharded=sharded,
                              uploaded_step=start.remote_step, stop_requested=self.stop_requested,
                              grace_seconds=config.grace_seconds, poll_seconds=config.poll_seconds)
        if self._budget is not None:
            self._budget.start()
        try:
            return self._train(uploads, start.resume_from)
        finally:
            uploads.close()
            if self._budget is not None:
                self._budget.stop()

    def _forward_bootstrap_log(self) -> None:
        """User data logs to a file before any agent exists; its lines join this instance's stream."""
        path = Path(self.config.bootstrap_log) if self.config.bootstrap_log else None
        if self.clients.cloud is None or path is None or not path.is_file():
            return
        for line in path.read_text(errors="replace").splitlines():
            self.clients.cloud.log(line)

    def _wait_for_lease(self) -> bool:
        announced = False
        while not self.clients.lease.acquire():
            if not announced:
                held = self.clients.lease.held_by
                holder = f" ({held.owner}, token {held.token}, expiring {utc_text(held.expires_at)})" if held else ""
                self.log(f"another agent holds the job lease{holder}; waiting for it to finish, expire or go "
                         f"unrenewed for {self.config.lease_ttl_seconds:.0f}s")
                self.telemetry.event(EventKind.LEASE_WAIT, holder=held.owner if held else None)
                announced = True
            if self._notices.reason() or self.stop_requested.wait(self.config.poll_seconds):
                return False
        self.log(f"took the job lease (token {self.clients.lease.token})")
        return True

    # ---- the training loop --------------------------------------------------------------------
    def _train(self, uploads: NodeUploads, resume_from: Checkpoint | None) -> int:
        failures, endings, rounds = 0, self.endings, self.rounds
        while True:
            reporter = self._require_reporter()
            reporter.update(state=JobState.TRAINING, attempt=reporter.status.attempt + 1, reason="")
            command = start_command(self.config, resume_from, attempt=reporter.status.attempt,
                                    round_file=self.rounds.round_file, local_addr=self.world.local_addr,
                                    sink=self.telemetry.command_output, log=self.log)
            # The built-in trainer resumes by contract; a command of the user's own is watched for a fresh start.
            watch = self._save_watch().start(resumed=resume_from is not None,
                                             restored=None if self._builtin or not resume_from else resume_from.path)
            self._hang.restart(time.monotonic())
            try:
                end = self._supervise(command, uploads, watch)
            except BaseException:  # the agent itself broke: let the command save and stop, then report
                self.stopping.command(command)
                raise
            if end.outcome is Outcome.LOST_LEASE:  # a fenced writer must not publish anything more
                raise AgentError("the job lease was taken over by another agent; stopped training")
            if end.outcome is Outcome.ROUNDS_EXHAUSTED:
                uploads.settle()
                return endings.failed(rounds.failures.reason, rounds.failures.count)
            newest = uploads.settle()
            if end.outcome is Outcome.OVER_BUDGET:
                return endings.stopped_by_budget(self._budget.said if self._budget else "", newest)
            if end.outcome is Outcome.HUNG:
                if self._hang.again_at_the_same_step():
                    return endings.failed(f"the command hung twice at step {self._hang.step}: {self._hang.said}",
                                          failures)
                self.log(f"starting the command again from the newest checkpoint (a second hang at step "
                         f"{self._hang.step} ends the job)")
                resume_from = self.restore.restart_point(resume_from)
                continue
            if end.outcome is Outcome.STOPPED:
                return endings.stopped(end.reason, newest)
            if end.code == 0:
                return self._finished(uploads, newest, failures)
            reason = f"command exited with code {end.code}" + (
                f": {command.last_stderr_line}" if command.last_stderr_line else ""
            )
            if self.config.distributed:
                if rounds.exhausted_by_failure(reason, end.code):
                    return endings.failed(rounds.failures.reason, rounds.failures.count)
                uploads.settle_parts()  # before the next round sets this disk's newer saves aside
                resume_from = self.world.catch_up(uploads.uploader, self.telemetry.group_stop_step,
                                                  rounds.publishes(), lambda: self.restore.newest(writer_done=True),
                                                  self.restore.prepare, self.restore.before_a_round)
                continue
            failures += 1
            self.telemetry.event(EventKind.FAILURE, exit_code=end.code, reason=reason, failures=failures)
            self.log(f"training failed ({failures}/{self.config.restart_budget}): {reason}")
            if failures >= max(1, self.config.restart_budget):
                return endings.failed(reason, failures)
            reporter.update(failures=failures)
            # Back off a little (a device or a mount that is not ready yet); a stop request cuts it short.
            self.stop_requested.wait(min(60.0, self.config.poll_seconds * 2 ** (failures - 1)))
            resume_from = self.restore.restart_point(resume_from)

    def _finished(self, uploads: NodeUploads, newest: int | None, failures: int) -> int:
        """The command exited 0: DONE once the final checkpoint is in S3 (on several nodes, the publisher's)."""
        if self.config.distributed and not self.rounds.publishes():
            uploads.settle()  # its own shards of the final save: without them it is never whole
            return self.endings.after_the_publisher()
        if self.rounds.publishes() and (missing := uploads.final_missing(newest)):
            return self.endings.failed(missing, failures, keep_instance=True)
        if self.config.distributed:  # rank 0 may have written on another node
            newest = self.clients.store.latest_step()
        if self.rounds.publishes():  # several nodes: one node's outputs, not each rank's parts
            keep_final_outputs(self.telemetry, Path(self.config.checkpoint_dir))
        return self.endings.done(newest)

    def _supervise(self, command: CommandProcess, uploads: NodeUploads, watch: SaveWatch) -> RunEnd:
        """Run until the command exits or must stop."""
        main_exited_at: float | None = None
        while True:
            code = command.wait(timeout=self.config.poll_seconds)
            if code is None and (main_code := command.poll()) is not None:
                main_exited_at = main_exited_at or time.monotonic()
                code = self.stopping.leftovers(command, main_code, main_exited_at)
            round_ = self.rounds.current()  # read once per poll
            newest = uploads.offer_newest(code is not None, round_)
            if newest is not None:
                self.newest_on_disk = max(newest.step, self.newest_on_disk or 0)
            self.rounds.say(round_)
            if self.rounds.exhausted_when_formed(round_):
                self.stopping.command(command)
                return RunEnd(Outcome.ROUNDS_EXHAUSTED, -1)
            watch.check(newest, exited=code == 0)
            if code is not None:
                return RunEnd(Outcome.EXITED, code)
            now = time.monotonic()
            shown = [step for step in (self._require_reporter().status.step, newest.step if newest else None) if step]
            self._hang.saw(max(shown) if shown else None, now)
            if self._hang.hung(now):
                self.log(f"{self._hang.line(now)}: stopping the command with {self.config.stop_signal}")
                return RunEnd(Outcome.HUNG, self.stopping.command(command))
            if self._deadline is not None:
                self._deadline.check(self._require_reporter().status.step)
            # Several nodes: each keeps the cap (no node waits on another to be told); the first to stop
            # records it and scales the group to zero, the others record what it said.
            if self._budget is not None and (why := self._budget.reason_to_stop()):
                self.log(f"{why}: stopping the command with {self.config.stop_signal}")
                return RunEnd(Outcome.OVER_BUDGET, self.stopping.command(command))
            reason = self._notices.reason() or ("agent asked to stop" if self.stop_requested.is_set() else None)
            if self._keeper is not None and self._keeper.lost.is_set():
                self.stopping.command(command)
                return RunEnd(Outcome.LOST_LEASE, -1)
            if reason:
                grace = self.stopping.grace_before_reclaim()
                self.log(f"{reason}: stopping the command with {self.config.stop_signal}")
                # The signal first: the status write may wait on S3, and the notice's minutes are short.
                code = self.stopping.command(command, grace,
                                          after_signal=lambda: self.telemetry.update(state=JobState.STOPPING))
                return RunEnd(Outcome.STOPPED, code, reason)
            self._require_reporter().tick()

    def _save_watch(self) -> SaveWatch:
        def warn(message: str) -> None:
            if self.config.distributed and self.clients.store.latest_step() is not None:
                return  # rank 0 writes on another node, and S3 shows it has saved
            self.telemetry.warn(message)

        # A look through the working directory every dozen polls: once a minute at the default 5 s.
        return SaveWatch(Path(self.config.checkpoint_dir), self.config.save_warn_seconds, warn,
                         workdir=Path(self.config.workdir) if self.config.workdir else None,
                         look_every_seconds=12 * self.config.poll_seconds)

    # ---- small accessors ----------------------------------------------------------------------
    @property
    def _builtin(self) -> bool:
        return self.config.command == "builtin"

    def _require_reporter(self) -> StatusReporter:
        assert self.telemetry.reporter is not None, "status is created once the lease is held"
        return self.telemetry.reporter

    def log(self, line: str) -> None:
        self.telemetry.log(line)


def install_stop_handlers(agent: Agent) -> SignalConnector:
    """SIGTERM/SIGINT (systemd stop, shutdown) are handled like a notice: checkpoint, upload, exit."""
    signals = SignalConnector()
    if not signals.register((signal.SIGTERM, signal.SIGINT), lambda signum: agent.stop_requested.set(), chain=False):
        agent.log("not on the main thread: SIGTERM and SIGINT keep their handlers, a stop comes only from a notice")
    return signals
