"""The supervisor on each instance: lease → restore → run the command → upload → stop cleanly.

One agent per job trains at a time (the S3 lease). While the command runs, the agent renews the
lease, watches IMDS for an interruption notice, uploads each new checkpoint in the background and
keeps status.json, the event log, CloudWatch Logs and metrics current. On a notice it stops the
command with the configured signal, waits for its emergency checkpoint, uploads it and hands the
lease back, so the next instance resumes without losing a completed step.

`Agent` keeps the loop; its rooms own the rest: where the command starts from (restore.py), how it
is started (command_start.py) and stopped (stopping.py), what this node sends to S3 (uploads.py) and
how its part in the job ends (endings.py), in node/. What differs between a node alone and several nodes
as one is the node's mode (node/mode.py), chosen once here and built by its own folder: one_node/ or
several_nodes/.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..costs.spot_prices import SpotPriceSource
from ..signals import SignalConnector
from ..storage.record_kinds import EventKind, JobState
from ..storage.s3.lease import Lease
from ..storage.saves import fixed_names
from ..storage.saves.layouts import Checkpoint
from ..storage.steps.other_regions import OtherRegions
from ..storage.steps.remote import RemoteStore
from . import one_node, several_nodes
from .instance.aws_clients import AutoScalingClient
from .instance.config import AgentConfig, known_total_steps
from .instance.imds import ImdsClient
from .instance.own_group import OwnGroup
from .node.command_start import start_command
from .node.endings import Endings
from .node.mode import NodeMode, NodeSetup
from .node.outcome import Outcome, RunEnd
from .node.restore import Restore
from .node.uploads import NodeUploads
from .program.command import CommandProcess
from .program.stopping import Stopping
from .records import status as states
from .records.cloudwatch import CloudWatchSink
from .records.notify import Notifier, SnsClient
from .records.status import JobStatus, StatusReporter
from .records.telemetry import RunTelemetry
from .watches.budget_watch import BudgetWatch, budget_watch_for
from .watches.deadline_watch import DeadlineWatch, deadline_watch_for
from .watches.hang_watch import HangWatch
from .watches.notice_watch import NoticeWatch
from .watches.save_watch import SaveWatch


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
    other_regions: dict[str, RemoteStore] = field(default_factory=dict)  # a job of several regions: theirs


@dataclass
class Agent:
    config: AgentConfig
    clients: Clients
    instance_id: str
    stop_requested: threading.Event = field(default_factory=threading.Event)
    started_at: float = field(default_factory=time.time)
    telemetry: RunTelemetry = field(init=False)
    mode: NodeMode = field(init=False)  # a node alone or several nodes as one, chosen once
    restore: Restore = field(init=False)
    endings: Endings = field(init=False)
    stopping: Stopping = field(init=False)
    newest_on_disk: int | None = None  # the newest complete checkpoint seen here, for the instance record
    _notices: NoticeWatch = field(init=False)
    _deadline: DeadlineWatch | None = None
    _budget: BudgetWatch | None = None
    _hang: HangWatch = field(init=False)

    def __post_init__(self) -> None:
        config, clients = self.config, self.clients
        self.telemetry = RunTelemetry(store=clients.store, cloud=clients.cloud)
        self._notices = NoticeWatch(clients.imds, config.react_to_rebalance, self.log)
        self.stopping = Stopping(config.stop_signal, config.grace_seconds, self._notices, self.telemetry)
        if config.notify_topic and clients.sns is not None:
            self.telemetry.notifier = Notifier(config.notify_topic, clients.sns, config.job, self.log)
        # The entries the job names as its checkpoint are one for every layout this agent asks.
        fixed_names.name_entries([name for name in config.checkpoint_files.split(",") if name])
        self.mode = self._build_mode()
        self.restore, self.endings = self.mode.restore, self.mode.endings
        self._hang = HangWatch(config.stall_minutes * 60 if self.mode.watches_progress else 0)

    @property
    def _elsewhere(self) -> OtherRegions | None:
        """A job of several regions: its buckets in the others, where a newer step may lie."""
        return OtherRegions(self.clients.other_regions) if self.clients.other_regions else None

    def _build_mode(self) -> NodeMode:
        config, clients = self.config, self.clients
        setup = NodeSetup(config, clients.store, self.telemetry, self._notices, self.stop_requested,
                          self._own_group(), self._elsewhere)
        if config.distributed:
            return several_nodes.build(setup, clients.imds, clients.other_regions, started_at=self.started_at,
                                       instance_id=self.instance_id)
        return one_node.build(setup, clients.lease)

    def _own_group(self) -> OwnGroup:
        return OwnGroup(self.config.asg_name, self.config.lifecycle_hook, self.instance_id, self.clients.imds,
                        self.clients.autoscaling, self.log)

    # ---- entry point --------------------------------------------------------------------------
    def run(self) -> int:
        self.log(f"agent on {self.instance_id} for job {self.config.job} (s3://{self.config.bucket})")
        self._forward_bootstrap_log()
        return self.mode.run(self._run_job)

    def _run_job(self) -> int:
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
        uploads = self.mode.uploads(start.remote_step)
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

    # ---- the training loop --------------------------------------------------------------------
    def _train(self, uploads: NodeUploads, resume_from: Checkpoint | None) -> int:
        endings, mode = self.endings, self.mode
        while True:
            reporter = self._require_reporter()
            reporter.update(state=JobState.TRAINING, attempt=reporter.status.attempt + 1, reason="")
            command = start_command(self.config, resume_from, attempt=reporter.status.attempt,
                                    launch=mode.launch(), sink=self.telemetry.command_output, log=self.log)
            # The built-in trainer resumes by contract; a command of the user's own is watched for a fresh start.
            own = not self.config.program.builtin
            watch = self._save_watch().start(resumed=resume_from is not None,
                                             restored=resume_from.path if own and resume_from else None)
            self._hang.restart(time.monotonic())
            try:
                end = self._supervise(command, uploads, watch)
            except BaseException:  # the agent itself broke: let the command save and stop, then report
                self.stopping.command(command)
                raise
            if end.outcome is Outcome.LOST_LEASE:  # a fenced writer must not publish anything more
                raise AgentError("the job lease was taken over by another agent; stopped training")
            if end.outcome is Outcome.GAVE_UP:
                uploads.settle()
                return mode.gave_up()
            newest = uploads.settle()
            if end.outcome is Outcome.OVER_BUDGET:
                return endings.stopped_by_budget(self._budget.said if self._budget else "", newest)
            if end.outcome is Outcome.HUNG:
                if self._hang.again_at_the_same_step():
                    return endings.failed(f"the command hung twice at step {self._hang.step}: {self._hang.said}",
                                          mode.failures)
                self.log(f"starting the command again from the newest checkpoint (a second hang at step "
                         f"{self._hang.step} ends the job)")
                resume_from = self.restore.restart_point(resume_from)
                continue
            if end.outcome is Outcome.STOPPED:
                return endings.stopped(end.reason, newest)
            if end.code == 0:
                return mode.finished(uploads, newest)
            reason = f"command exited with code {end.code}" + (
                f": {command.last_stderr_line}" if command.last_stderr_line else ""
            )
            if mode.failed(reason, end.code):
                return mode.gave_up()
            resume_from = mode.next_start(uploads, resume_from)

    def _supervise(self, command: CommandProcess, uploads: NodeUploads, watch: SaveWatch) -> RunEnd:
        """Run until the command exits or must stop."""
        main_exited_at: float | None = None
        while True:
            code = command.wait(timeout=self.config.poll_seconds)
            if code is None and (main_code := command.poll()) is not None:
                main_exited_at = main_exited_at or time.monotonic()
                code = self.stopping.leftovers(command, main_code, main_exited_at)
            polled = self.mode.poll(uploads, exited=code is not None)
            newest = polled.newest
            if newest is not None:
                self.newest_on_disk = max(newest.step, self.newest_on_disk or 0)
            if polled.gave_up:
                self.stopping.command(command)
                return RunEnd(Outcome.GAVE_UP, -1)
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
            if self.mode.lease_lost():
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
            if self.mode.saved_elsewhere():
                return
            self.telemetry.warn(message)

        # A look through the working directory every dozen polls: once a minute at the default 5 s.
        return SaveWatch(Path(self.config.checkpoint_dir), self.config.save_warn_seconds, warn,
                         workdir=Path(self.config.workdir) if self.config.workdir else None,
                         look_every_seconds=12 * self.config.poll_seconds)

    # ---- small accessors ----------------------------------------------------------------------
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
