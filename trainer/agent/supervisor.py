"""The supervisor on each instance: lease → restore → run the command → upload → stop cleanly.

One agent per job trains at a time (the S3 lease). While the command runs, the agent renews the
lease, watches IMDS for an interruption notice, uploads each new checkpoint in the background and
keeps status.json, the event log, CloudWatch Logs and metrics current. On a notice it stops the
command with the configured signal, waits for its emergency checkpoint, uploads it and hands the
lease back, so the next instance resumes without losing a completed step.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..costs.spot_prices import SpotPriceSource
from ..rounds import ROUND_FILE_ENV, ROUND_RESUME_ENV, Round, read_round
from ..signals import parse_signal
from ..storage import job_keys, layouts, shards, staging
from ..storage.lease import Lease
from ..storage.remote import RemoteStore, RemoteStoreError
from ..storage.step_parts import StepParts
from ..storage.uploader import CheckpointUploader
from . import status as states
from .aws_clients import AutoScalingClient
from .budget_watch import BUDGET_EVENT, BudgetWatch, budget_watch_for
from .cloudwatch import CloudWatchSink
from .command import CommandProcess, runtime_argv, with_auto_resume
from .config import AgentConfig, known_total_steps
from .deadline_watch import DeadlineWatch, deadline_watch_for
from .hang_watch import HangWatch
from .imds import ImdsClient
from .keep_outputs import keep_final_outputs
from .lease_keeper import LeaseKeeper
from .notice_deadline import stop_budget
from .notice_watch import NoticeWatch
from .notify import Notifier, SnsClient
from .own_group import SCALE_IN_WAIT_SECONDS, OwnGroup
from .round_failures import CHANGED, EXHAUSTED, RoundFailures
from .save_watch import SaveWatch
from .sharded_saves import PART_WAIT_SECONDS, ShardedSaves, wait_for_part
from .status import JobStatus, StatusReporter, utc_text
from .telemetry import RunTelemetry
from .torchrun import torchrun_argv, worker_argv
from .world import World

SINGLE_NODE_ENV = {"NODE_RANK": "0", "NNODES": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
LEFTOVER_SECONDS = 30.0  # how long processes may outlive the command's main process before they are stopped
HUNG = "hung"  # _supervise's outcome: no progress for the stall limit (hang_watch.py)
OVER_BUDGET = "over budget"  # _supervise's outcome: the spending cap is reached (budget_watch.py)
EXIT_FAILED = 3  # the job failed for good: systemd must not restart the agent (RestartPreventExitStatus)
# Several nodes: beyond the grace period (the publisher's retries of its final checkpoint), how long a
# node whose command finished waits for the publisher's uploads (final checkpoint, final outputs) to end.
FINAL_UPLOAD_ALLOWANCE_SECONDS = 600.0


def default_round_file(pid: int) -> Path:
    """Several nodes: where the launcher records the round this node is in (spot_trainer.rounds)."""
    return Path(tempfile.gettempdir()) / f"spot-trainer-{pid}-round.json"


class AgentError(RuntimeError):
    """The agent cannot go on (S3 unreachable after retries, lease lost); the message says why."""


def newest_local_checkpoint(directory: Path, *, writer_done: bool = False,
                            strict: bool = False) -> tuple[int, Path] | None:
    """The newest complete checkpoint in the directory, in any layout the agent knows."""
    newest = layouts.newest_complete(directory, writer_done=writer_done, strict=strict)
    return (newest.step, newest.path) if newest else None


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
    _keeper: LeaseKeeper | None = None
    telemetry: RunTelemetry = field(init=False)
    _notices: NoticeWatch = field(init=False)
    _deadline: DeadlineWatch | None = None
    _budget: BudgetWatch | None = None
    started_at: float = field(default_factory=time.time)
    round_file: Path = field(default_factory=lambda: default_round_file(os.getpid()))
    _said_round: Round | None = None
    _round_failures: RoundFailures = field(init=False)
    _hang: HangWatch = field(init=False)
    _sharded: ShardedSaves | None = None  # several nodes: this node's part of each save DCP wrote in shards

    def __post_init__(self) -> None:
        self.telemetry = RunTelemetry(store=self.clients.store, cloud=self.clients.cloud)
        # Several nodes: a node that does not publish sees no progress of its own, and a world waiting
        # for min_nodes is no hang; the stall alarm still watches the job.
        watched = self.config.restart_on_stall and not self.config.distributed
        self._hang = HangWatch(self.config.stall_minutes * 60 if watched else 0)
        self._round_failures = RoundFailures(self.config.restart_budget)
        self._notices = NoticeWatch(self.clients.imds, self.config.react_to_rebalance, self.log)
        if self.config.notify_topic and self.clients.sns is not None:
            self.telemetry.notifier = Notifier(self.config.notify_topic, self.clients.sns, self.config.job, self.log)

    # ---- entry point --------------------------------------------------------------------------
    def run(self) -> int:
        self.log(f"agent on {self.instance_id} for job {self.config.job} (s3://{self.config.bucket})")
        self._forward_bootstrap_log()
        if self.config.distributed:  # every node trains: the rendezvous and step fencing replace the lease
            return self._run_holding_lease()
        if not self._wait_for_lease():
            self.log("stopped while waiting for the job lease; nothing to do")
            self._own_group().release()  # a standby chosen for scale-in has nothing to save
            return 0
        self._keeper = LeaseKeeper(self.clients.lease, self.config.lease_ttl_seconds, self.log).start()
        try:
            return self._run_holding_lease()
        finally:
            self._keeper.release()

    def _run_holding_lease(self) -> int:
        store = self.clients.store
        reporter = self.telemetry.reporter = StatusReporter(
            JobStatus.carried_over(store.read_record(states.STATUS_NAME), self.config.job, self.instance_id),
            publish=self.telemetry.publish_status,
            interval_seconds=self.config.status_interval_seconds,
        )
        reporter.update(state=states.RESTORING, total_steps=known_total_steps(self.config) or None)
        self.telemetry.event("start", attempt=reporter.status.attempt + 1)
        self._deadline = deadline_watch_for(self.config, self.clients.autoscaling, self.telemetry,
                                            reporter.status.first_started_at or time.time())
        self._budget = budget_watch_for(self.config, store, self.clients.prices, self.telemetry)
        if self._budget is not None and (why := self._budget.reason_to_stop()):
            return self._stopped_by_budget(why, store.latest_step())  # a cap not raised: no command to start
        resume_from, remote_step = self._restore()
        if self.config.distributed:
            self._sharded = ShardedSaves(StepParts(store), Path(self.config.checkpoint_dir), self.log,
                                         self.telemetry.event)
        uploader = CheckpointUploader(
            self._upload,
            self.telemetry.uploaded,
            uploaded_step=remote_step,
            log=self.log,
            warn=self.telemetry.upload_warning,
        )
        store.on_left_out = uploader.health.left_out
        if self._budget is not None:
            self._budget.start()
        try:
            return self._train(uploader, resume_from)
        finally:
            uploader.close()
            if self._budget is not None:
                self._budget.stop()

    def _upload(self, path: Path, step: int) -> bool | str:
        """The uploader's work: a checkpoint written in shards on several nodes goes up as this node's part."""
        if self._sharded is not None and shards.is_sharded(path):
            return self._sharded.upload(path, step)
        lease = None if self.config.distributed else self.clients.lease
        return self.clients.store.upload(path, step, lease=lease)

    def _forward_bootstrap_log(self) -> None:
        """User data logs to a file before any agent exists; its lines join this instance's stream."""
        path = Path(self.config.bootstrap_log) if self.config.bootstrap_log else None
        if self.clients.cloud is None or path is None or not path.is_file():
            return
        for line in path.read_text(errors="replace").splitlines():
            self.clients.cloud.log(line)

    # ---- lease and restore --------------------------------------------------------------------
    def _wait_for_lease(self) -> bool:
        announced = False
        while not self.clients.lease.acquire():
            if not announced:
                held = self.clients.lease.held_by
                holder = f" ({held.owner}, token {held.token}, expiring {utc_text(held.expires_at)})" if held else ""
                self.log(f"another agent holds the job lease{holder}; waiting for it to finish, expire or go "
                         f"unrenewed for {self.config.lease_ttl_seconds:.0f}s")
                self.telemetry.event("lease_wait", holder=held.owner if held else None)
                announced = True
            if self._notices.reason() or self.stop_requested.wait(self.config.poll_seconds):
                return False
        self.log(f"took the job lease (token {self.clients.lease.token})")
        return True

    def _restore(self) -> tuple[Path | None, int | None]:
        """The checkpoint to resume from, and the step latest.json held (read once, here)."""
        directory = Path(self.config.checkpoint_dir)
        directory.mkdir(parents=True, exist_ok=True)
        if leftovers := staging.remove_leftovers(directory):
            self.log(f"removed {', '.join(leftovers)}, left by an upload cut short")
        # Strict: a local entry may win over S3 only when its content proves it whole. Several nodes
        # resume from one published step: what this disk holds may be another rank's part.
        local = None if self.config.distributed else newest_local_checkpoint(directory, writer_done=True, strict=True)
        remote_step = self.clients.store.latest_step()
        if self.config.distributed and (aside := layouts.set_aside_above(directory, None)):
            self.log(f"set aside {', '.join(aside)} (as {layouts.UNVERIFIED_PREFIX}<name>): several nodes resume "
                     "from the step published in S3, never from what one node's disk holds")
        if local is not None and (remote_step is None or local[0] >= remote_step):
            restored: Path | None = local[1]  # this disk survived (agent restart): it is at least as new
            restored_step = local[0]
        else:
            started = time.monotonic()
            restored = self.clients.store.restore_at_or_below(directory, remote_step)
            if restored is not None:
                self.log(f"restored {restored.name} from S3 in {time.monotonic() - started:.2f}s")
            remote_step = self._settle_fallback(remote_step, self.clients.store.restored_step)
            # From S3's record, not the name: a series member alone on this disk is no series yet.
            restored_step = self.clients.store.restored_step or 0
        self._prepare_directory(restored)
        self._set_aside_unverified(directory, restored_step if restored else None)
        if restored is None:
            self.log("no checkpoint yet: starting fresh")
            return None, remote_step
        step = restored_step
        self.log(f"resuming from checkpoint step {step} ({restored.name})")
        self.telemetry.event("resume", step=step)
        self.telemetry.update(checkpoint_step=max(step, remote_step or 0))
        return restored, remote_step

    def _settle_fallback(self, named: int | None, restored: int | None) -> int | None:
        """latest.json named a step that could not be restored: what is really in S3 is the step that
        was (the uploader's floor, and what "safe in S3" may say), and latest.json is pointed at it so
        the steps trained again are published."""
        if named is None or restored == named:
            return named
        if not self._proven_damaged(named):  # S3 failed to answer: no proof latest.json is wrong
            return named
        if restored is not None and self.clients.store.repoint(restored, named):
            self.log(f"latest.json named step {named}, which could not be restored: it now names step {restored}")
        elif restored is None:
            self.log(f"latest.json names step {named}, but no checkpoint in S3 could be restored")
        return restored

    def _proven_damaged(self, step: int) -> bool:
        """A restore proved the step damaged, or S3 says it has no manifest."""
        if step in self.clients.store.damaged_steps:
            return True
        try:
            return not self.clients.store.has_checkpoint(step)
        except RemoteStoreError:
            return False

    # ---- the training loop --------------------------------------------------------------------
    def _train(self, uploader: CheckpointUploader, resume_from: Path | None) -> int:
        failures = 0
        while True:
            reporter = self._require_reporter()
            reporter.update(state=states.TRAINING, attempt=reporter.status.attempt + 1, reason="")
            command = self._start_command(resume_from)
            # The built-in trainer resumes by contract; a command of the user's own is watched for a fresh start.
            watch = self._save_watch().start(resumed=resume_from is not None,
                                             restored=None if self._builtin else resume_from)
            self._hang.restart(time.monotonic())
            try:
                outcome, code = self._supervise(command, uploader, watch)
            except BaseException:  # the agent itself broke: let the command save and stop, then report
                self._stop_command(command)
                raise
            if outcome == "lost-lease":  # a fenced writer must not publish anything more
                raise AgentError("the job lease was taken over by another agent; stopped training")
            if outcome == EXHAUSTED:
                self._settle_uploads(uploader)
                return self._failed(self._round_failures.reason, self._round_failures.count)
            newest = self._settle_uploads(uploader)
            if outcome == OVER_BUDGET:
                return self._stopped_by_budget(self._budget.said if self._budget else "", newest)
            if outcome == HUNG:
                if self._hang.again_at_the_same_step():
                    return self._failed(f"the command hung twice at step {self._hang.step}: {self._hang.said}",
                                        failures)
                self.log(f"starting the command again from the newest checkpoint (a second hang at step "
                         f"{self._hang.step} ends the job)")
                resume_from = self._restart_point(resume_from)
                continue
            if outcome != "exited":
                if self.config.distributed and (ending := self._world().ended_by_a_peer(self.started_at)):
                    return self._ended_elsewhere(ending)
                # Even an exit 0 after our stop signal is an interruption: a script that exits 0 on
                # SIGTERM must not end the job. If it had really finished, the next run confirms DONE.
                return self._interrupted(outcome, newest)
            if code == 0:
                if self.config.distributed and not self._publishes():
                    self._settle_uploads(uploader)  # its own shards of the final save: without them it is never whole
                    return self._after_the_publisher()
                if self._publishes() and (missing := self._final_upload(uploader, newest)):
                    return self._failed(missing, failures, keep_instance=True)
                if self.config.distributed:  # rank 0 may have written on another node
                    newest = self.clients.store.latest_step()
                if self._publishes():  # several nodes: one node's outputs, not each rank's parts
                    keep_final_outputs(self.telemetry, Path(self.config.checkpoint_dir))
                return self._done(newest)
            reason = f"command exited with code {code}" + (
                f": {command.last_stderr_line}" if command.last_stderr_line else ""
            )
            if self.config.distributed:
                if self._round_ended(reason, code) == EXHAUSTED:
                    return self._failed(self._round_failures.reason, self._round_failures.count)
                self._settle_parts(uploader)  # before the next round sets this disk's newer saves aside
                resume_from = self._catch_up(uploader)
                continue
            failures += 1
            self.telemetry.event("failure", exit_code=code, reason=reason, failures=failures)
            self.log(f"training failed ({failures}/{self.config.restart_budget}): {reason}")
            if failures >= max(1, self.config.restart_budget):
                return self._failed(reason, failures)
            reporter.update(failures=failures)
            # Back off a little (a device or a mount that is not ready yet); a stop request cuts it short.
            self.stop_requested.wait(min(60.0, self.config.poll_seconds * 2 ** (failures - 1)))
            resume_from = self._restart_point(resume_from)

    def _round_ended(self, reason: str, code: int) -> str | None:
        """Several nodes: a round failed. Whether it counts is decided when the next round forms
        (spot_trainer.agent.round_failures); EXHAUSTED when no round formed since the last failure
        and the budget is spent."""
        round_ = self._round()
        if self._round_failures.failed(round_.nodes if round_ else None, reason) == EXHAUSTED:
            return EXHAUSTED
        failures = self._round_failures
        self.telemetry.event("round_ended", exit_code=code, reason=reason, failures=failures.count)
        self._require_reporter().update(failures=failures.count)
        self.log(f"the round ended: {reason}; joining the next round (failed rounds in a world of "
                 f"{len(failures.world or ())} node(s): {failures.count}/{self.config.restart_budget}, "
                 "forgiven if the next round's nodes differ)")
        self.stop_requested.wait(min(60.0, self.config.poll_seconds * 2 ** (failures.count - 1)))
        return None

    def _judge_round(self, round_: Round | None) -> str | None:
        """Several nodes, each poll: once the round after a failure forms, was it the world changing?"""
        if round_ is None:
            return None
        verdict = self._round_failures.round_formed(round_.nodes)
        if verdict == CHANGED:
            self.log(f"the world changed ({round_.line()}): the last round ended with a peer leaving or "
                     "joining, not a failure of the command")
        elif verdict == EXHAUSTED:
            self.log(f"training failed {self._round_failures.count} time(s) in the same world of "
                     f"{len(round_.nodes)} node(s): {self._round_failures.reason}")
        return verdict

    def _final_upload(self, uploader: CheckpointUploader, uploaded: int | None) -> str:
        """DONE needs the final checkpoint in S3: retried for up to the grace period (S3 may be having a bad
        minute); '' once it is there, else why the job must not end DONE."""
        deadline = time.monotonic() + self.config.grace_seconds
        while missing := self._final_not_in_s3(uploaded):
            if time.monotonic() >= deadline or self.stop_requested.is_set():
                return missing
            self.log(f"{missing}; retrying its upload")
            uploaded = self._settle_uploads(uploader)
            self.stop_requested.wait(min(5.0, max(0.0, deadline - time.monotonic())))
        return ""

    def _final_not_in_s3(self, uploaded: int | None) -> str:
        """Why the job must not end DONE: its newest checkpoint is only on this disk ('' when in S3)."""
        local = self._newest_local(writer_done=True)
        part = self._sharded.coordinator_part(writer_done=True) if self._sharded is not None else None
        if part is not None and (local is None or part.step > local[0]):
            local = (part.step, part.path)
        if local is None or (uploaded is not None and local[0] <= uploaded):
            return ""
        try:
            in_s3 = self.clients.store.latest_step()
        except RemoteStoreError as error:
            return f"the final checkpoint (step {local[0]}) could not be confirmed in S3 ({error})"
        if in_s3 is not None and in_s3 >= local[0]:
            return ""
        if part is not None and self._sharded is not None and part.step == local[0]:
            return f"the final checkpoint (step {local[0]}) is not whole in S3 yet: {self._sharded.awaited(local[0])}"
        return f"the final checkpoint (step {local[0]}) did not reach S3: it is only on this instance's disk"

    def _confirmed_in_s3(self, step: int | None) -> bool:
        """Read back: latest.json names `step` or later and its manifest is there."""
        if step is None:
            return False
        try:
            in_s3 = self.clients.store.latest_step()
            return in_s3 is not None and in_s3 >= step and self.clients.store.has_checkpoint(step)
        except RemoteStoreError:
            return False

    def _catch_up(self, uploader: CheckpointUploader) -> Path | None:
        return self._world().catch_up(uploader, self.telemetry.group_stop_step, self._publishes(),
                                      lambda: self._newest_local(writer_done=True), self._prepare_directory)

    def _restart_point(self, resume_from: Path | None) -> Path | None:
        """The newest whole checkpoint on this disk (else what the last run was given), made ready."""
        local = self._newest_local(writer_done=True)
        resume_from = local[1] if local else resume_from
        self._prepare_directory(resume_from)
        return resume_from

    def _round(self) -> Round | None:
        """Several nodes: the round this node is in, as the launcher last recorded it."""
        return read_round(self.round_file) if self.config.distributed else None

    def _publishes(self, round_: Round | None = None) -> bool:
        """One node publishes each step: on a single node this one; on several, the node holding group
        rank 0 in the current round (its global rank 0 is where every framework saves whole). Before a
        round forms, none."""
        if not self.config.distributed:
            return True
        round_ = round_ or self._round()
        return round_ is not None and round_.publishes

    def _prepare_directory(self, resume_from: Path | None) -> None:
        """What a dead writer left half-written goes aside, so the framework resumes from `resume_from`."""
        hidden = layouts.prepare_for_resume(Path(self.config.checkpoint_dir), resume_from)
        if hidden:
            self.log(f"moved aside unfinished checkpoints {', '.join(hidden)} (as {layouts.INCOMPLETE_PREFIX}<name>)")

    def _set_aside_unverified(self, directory: Path, restored_step: int | None) -> None:
        """Whatever sits above the restore point was not proven whole: it must neither be resumed
        from nor published (a stray `step-00000099` would otherwise outrank every real step)."""
        above = layouts.set_aside_above(directory, restored_step)
        if above:
            hint = " (a checkpoint of the built-in trainer carries a COMMITTED marker)" if self._builtin else ""
            self.log(f"set aside {', '.join(above)} in CHECKPOINT_DIR (as "
                     f"{layouts.UNVERIFIED_PREFIX}<name>): newer than the restore point, and nothing "
                     f"proves it complete{hint}")
            self.telemetry.event("set_aside", names=above)

    @property
    def _builtin(self) -> bool:
        return self.config.command == "builtin"

    def _newest_local(self, *, writer_done: bool) -> tuple[int, Path] | None:
        """The built-in trainer always writes a COMMITTED marker: for it, nothing else counts."""
        return newest_local_checkpoint(Path(self.config.checkpoint_dir), writer_done=writer_done,
                                       strict=self._builtin)

    def _start_command(self, resume_from: Path | None) -> CommandProcess:
        config = self.config
        if config.distributed:
            worker = worker_argv(config, shlex.split(config.train_args))
            argv = torchrun_argv(config, self._world().local_addr(), worker)
            self.round_file.unlink(missing_ok=True)  # the launcher writes it again once a round forms
        elif self._builtin:
            argv = runtime_argv("train", *shlex.split(config.train_args))
        else:
            argv = ["/bin/bash", "-c", config.command]
        env = {
            # torchrun (the agent's own, or one the command starts, as `accelerate launch` does) forwards
            # the stop signal to its ranks but kills them 30 s later by default: a large emergency save
            # gets the whole grace period instead (torch >= 2.12 reads this; older versions keep 30 s)
            "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(math.ceil(config.grace_seconds)),
            **os.environ,
            **config.extra_env,
            "CHECKPOINT_DIR": str(Path(config.checkpoint_dir).resolve()),
            "RESUME_FROM": str(resume_from.resolve()) if resume_from else "",
            "JOB_NAME": config.job,
            "JOB_ATTEMPT": str(self._require_reporter().status.attempt),
            # Several nodes: torchrun gives each rank RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT.
            **({ROUND_FILE_ENV: str(self.round_file)} if config.distributed else SINGLE_NODE_ENV),
        }
        if config.distributed and not self._builtin:  # the built-in trainer agrees on a step by itself
            env[ROUND_RESUME_ENV] = "1"
        if not self._builtin:  # the built-in trainer resumes by itself
            env = with_auto_resume(env)
        self.log(f"starting {'the built-in trainer' if self._builtin else config.command!r}"
                 f" (attempt {env['JOB_ATTEMPT']}, resume from {env['RESUME_FROM'] or 'scratch'})")
        return CommandProcess(argv, env, cwd=config.workdir, sink=self.telemetry.command_output).start()

    def _supervise(self, command: CommandProcess, uploader: CheckpointUploader,
                   watch: SaveWatch) -> tuple[str, int]:
        """Run until the command exits or must stop: ("exited" | notice reason | "lost-lease", code)."""
        main_exited_at: float | None = None
        while True:
            code = command.wait(timeout=self.config.poll_seconds)
            if code is None and (main_code := command.poll()) is not None:
                main_exited_at = main_exited_at or time.monotonic()
                code = self._stop_leftovers(command, main_code, main_exited_at)
            round_ = self._round()  # read once per poll
            newest = self._offer_newest(uploader, code is not None, round_)
            self._say_round(round_)
            if self._judge_round(round_) == EXHAUSTED:
                self._stop_command(command)
                return EXHAUSTED, -1
            watch.check(newest, exited=code == 0)
            if code is not None:
                return "exited", code
            now = time.monotonic()
            shown = [step for step in (self._require_reporter().status.step, newest[0] if newest else None) if step]
            self._hang.saw(max(shown) if shown else None, now)
            if self._hang.hung(now):
                self.log(f"{self._hang.line(now)}: stopping the command with {self.config.stop_signal}")
                return HUNG, self._stop_command(command)
            if self._deadline is not None:
                self._deadline.check(self._require_reporter().status.step)
            # Several nodes: each keeps the cap (no node waits on another to be told); the first to stop
            # records it and scales the group to zero, the others record what it said.
            if self._budget is not None and (why := self._budget.reason_to_stop()):
                self.log(f"{why}: stopping the command with {self.config.stop_signal}")
                return OVER_BUDGET, self._stop_command(command)
            reason = self._notices.reason() or ("agent asked to stop" if self.stop_requested.is_set() else None)
            if self._keeper is not None and self._keeper.lost.is_set():
                self._stop_command(command)
                return "lost-lease", -1
            if reason:
                grace = self._grace_before_reclaim()
                self.log(f"{reason}: stopping the command with {self.config.stop_signal}")
                # The signal first: the status write may wait on S3, and the notice's minutes are short.
                return reason, self._stop_command(command, grace,
                                                  after_signal=lambda: self.telemetry.update(state=states.STOPPING))
            self._require_reporter().tick()

    def _offer_newest(self, uploader: CheckpointUploader, exited: bool,
                      round_: Round | None) -> tuple[int, Path] | None:
        """The newest complete checkpoint here, offered for upload when this node publishes. A new round
        has just formed when its record differs from the last one said: torchrun has stopped the last
        round's workers, so what they left is finished, and the node that published that round uploads
        it (every node of the new round waits for it in S3 before resuming: distributed/round_start.py)."""
        previous = self._said_round
        handover = round_ is not None and previous is not None and round_ != previous and previous.publishes
        newest = self._newest_local(writer_done=exited or handover)
        if newest is not None and (self._publishes(round_) or handover):
            uploader.offer(*newest)
        if self._sharded is not None:  # every node sends its own shards, publisher or not
            if (part := self._sharded.ready(writer_done=exited or handover, above=uploader.offered_step)) is not None:
                uploader.offer(part.step, part.path)
            self._sharded.check(self.clients.store.latest_step)
        return newest

    def _stop_leftovers(self, command: CommandProcess, main_code: int, exited_at: float) -> int | None:
        """The command's main process exited, but processes it started live on (a worker, a server it
        forgot): they get a bounded while to finish, then the stop signal; the command's code stands."""
        bound = min(LEFTOVER_SECONDS, self.config.grace_seconds)
        if time.monotonic() - exited_at < bound:
            return None
        self.log(f"the command exited with code {main_code} {bound:.0f}s ago, but processes it started still run: "
                 f"stopping them with {self.config.stop_signal}")
        command.stop(parse_signal(self.config.stop_signal), self.config.grace_seconds)
        return main_code

    def _stop_command(self, command: CommandProcess, grace_seconds: float | None = None,
                      after_signal: Callable[[], None] | None = None) -> int:
        code = command.stop(parse_signal(self.config.stop_signal), grace_seconds or self.config.grace_seconds,
                            after_signal)
        self.log(f"command exited with code {code}")
        if code == -int(signal.SIGKILL) and self._notices.reclaim_at is not None:
            self.log("the emergency checkpoint did not fit before the reclaim: the replacement resumes from "
                     "the newest checkpoint already in S3")
        return code

    def _say_round(self, round_: Round | None) -> None:
        """Once per round formed: its size and whether this node publishes."""
        if round_ is not None and round_ != self._said_round:
            self._said_round = round_
            self.log(round_.line())
            self.telemetry.event("round", number=round_.number, nodes=len(round_.nodes), group_rank=round_.group_rank)

    def _grace_before_reclaim(self) -> float:
        """The grace period, or on a spot notice what is left of it before the reclaim once the upload
        of the emergency checkpoint is set aside (the lifecycle hook holds scale-in, never a reclaim)."""
        if self._notices.reclaim_at is None:
            return self.config.grace_seconds
        budget = stop_budget(self.config.grace_seconds, self._notices.reclaim_at, time.time(),
                             self.telemetry.last_upload_seconds)
        self.log(budget.line)
        return budget.seconds

    def _settle_uploads(self, uploader: CheckpointUploader) -> int | None:
        """Offer the newest checkpoint, wait for it to be safe in S3; the step now in S3. The command
        has stopped: what it left can no longer change, so it may go up from its own files."""
        newest = self._newest_local(writer_done=True) if self._publishes() else None
        if newest is not None:
            uploader.offer(*newest, writer_done=True)
        self._settle_parts(uploader)
        uploader.drain()
        if newest is not None and uploader.offer(*newest, retry=True, writer_done=True):
            self.log(f"retrying the upload of checkpoint step {newest[0]}")
            uploader.drain()
        return uploader.uploaded_step

    def _settle_parts(self, uploader: CheckpointUploader) -> None:
        """Several nodes, the command has stopped: this node's part of its newest sharded save goes up, once
        the coordinator's record shows that save ended on every rank (waited for, bounded)."""
        if self._sharded is None:
            return
        try:  # a save S3 already holds, or a newer one, waits for nobody
            latest = self.clients.store.latest_step()
        except RemoteStoreError:
            latest = None
        above = max((step for step in (uploader.uploaded_step, latest) if step is not None), default=None)
        if self._sharded.pending_here(above) is not None:
            self.log("waiting for the node holding .metadata to send its part of the newest save here, so that "
                     "this node's shards follow")
        bound = min(self.config.grace_seconds, PART_WAIT_SECONDS)
        part = wait_for_part(self._sharded, above, bound, self.stop_requested, self.config.poll_seconds)
        if part is not None:  # a part whose upload failed goes once more; one sent already is not offered again
            uploader.offer(part.step, part.path, retry=True, writer_done=True)
        uploader.drain()

    # ---- endings ------------------------------------------------------------------------------
    def _interrupted(self, reason: str, step: int | None) -> int:
        reporter = self._require_reporter()
        reporter.update(state=states.INTERRUPTED, interruptions=reporter.status.interruptions + 1,
                        reason=reason)
        if step is None and self.config.distributed:  # rank 0 may have saved on another node
            step = self.clients.store.latest_step()
        self.telemetry.event("interruption", reason=reason, step=step)
        self._own_group().release()
        if step is None:
            saved = "no checkpoint yet"
        elif self._confirmed_in_s3(step):
            saved = f"checkpoint step {step} is safe in S3"
        else:
            saved = f"checkpoint step {step} could not be read back from S3"
        self.log(f"interrupted ({reason}); {saved}")
        return 0

    def _done(self, step: int | None) -> int:
        # The event first: a peer that sees status.json DONE then finds the event, with the step, beside it.
        self.telemetry.event("done", step=step)
        self._require_reporter().update(state=states.DONE)
        self._end_job(f"training finished at checkpoint step {step}")
        return 0

    def _after_the_publisher(self) -> int:
        """Several nodes, the command finished on a node that does not publish: the job is DONE only once
        the publisher has its final state in S3, so this node never ends the job (nor scales the group
        under the publisher's upload); it leaves with the publisher's recorded end, waited for bounded."""
        bound = self.config.grace_seconds + FINAL_UPLOAD_ALLOWANCE_SECONDS
        self.log(f"the command finished; waiting up to {bound:.0f}s for the node that publishes to have the final "
                 "state in S3 and end the job")
        awaited = self._world().await_ending(self.started_at, bound, self._notices.reason)
        if awaited.ending is not None:
            return self._ended_elsewhere(awaited.ending)
        if awaited.notice is not None:  # taken away while the publisher uploads: this node's part is over
            return self._interrupted(awaited.notice, None)
        # No end recorded in time (the publisher lost, or its upload slower than the bound). Ending DONE could
        # claim a final state S3 does not hold, and scaling to zero would stop a publisher still uploading:
        # the job stays the publisher's to end, and the stall alarm's if it never does.
        try:
            step = self.clients.store.latest_step()
            newest = "none yet" if step is None else str(step)
        except RemoteStoreError as error:
            newest = f"unknown ({error})"
        self.telemetry.warn(f"the command finished here, but the node that publishes recorded no end of the job "
                            f"within {bound:.0f}s (newest step in S3: {newest}): the job is not marked DONE and its "
                            "group is not scaled to zero; the node that publishes ends it once its final state is "
                            "in S3, else the stall alarm reports the job")
        return 0

    def _stopped_by_budget(self, reason: str, step: int | None) -> int:
        """At the spending cap: neither done nor failed. A higher cap and capacity resume the job."""
        if self.config.distributed and (ending := self._world().ended_by_a_peer(self.started_at)):
            return self._ended_elsewhere(ending)
        self._require_reporter().update(state=states.STOPPED_BY_BUDGET, reason=reason)
        saved = f"checkpoint step {step} is in S3" if step is not None else "no checkpoint yet"
        if self._first_to_record_budget_stop(reason, step):
            self.telemetry.event(BUDGET_EVENT, reason=reason, step=step, budget_usd=self.config.budget_usd)
        self._end_job(f"stopped at the budget ({reason}); {saved}")  # whoever recorded it: the group goes to zero
        return 0

    def _first_to_record_budget_stop(self, reason: str, step: int | None) -> bool:
        """Several nodes stop at the cap together: the first to create the cap's stop record says so (one
        event, one notification). A record left by an earlier stop at the same cap counts as said. When
        S3 cannot tell, this node says it: a second notice beats none."""
        if not self.config.distributed:
            return True
        record = {"reason": reason, "step": step, "instance": self.instance_id}
        try:
            return self.clients.store.create_once(job_keys.budget_stop(self.config.budget_usd), record)
        except RemoteStoreError as error:
            self.log(f"could not record the budget stop once for all nodes ({error}); recording it here")
            return True

    def _ended_elsewhere(self, ending: dict[str, Any]) -> int:
        """A peer finished the job, gave up on it or stopped it at its budget: the record says what it
        said, not "interrupted"."""
        if ending.get("kind") == BUDGET_EVENT:
            self._require_reporter().update(state=states.STOPPED_BY_BUDGET, reason=str(ending.get("reason") or ""))
            self.log("another node stopped the job at its budget; this one leaves too")
        elif ending.get("kind") == "failed":
            reason = str(ending.get("reason") or "")
            self._require_reporter().update(state=states.FAILED, reason=reason)
            self.log(f"another node gave up on the job ({reason}); this one leaves too")
        else:
            self._require_reporter().update(state=states.DONE)
            step = ending.get("step")
            at = f" at checkpoint step {step}" if step is not None else ""
            self.log(f"another node finished the job{at}; this one leaves too")
        self._own_group().release()
        return EXIT_FAILED if ending.get("kind") == "failed" else 0

    def _failed(self, reason: str, failures: int, *, keep_instance: bool = False) -> int:
        self._require_reporter().update(state=states.FAILED, reason=reason, failures=failures)
        self.telemetry.event("failed", reason=reason)
        self._end_job(f"giving up after {failures} failures: {reason}" if failures else f"giving up: {reason}",
                      keep_instance=keep_instance)
        return EXIT_FAILED

    def _end_job(self, message: str, *, keep_instance: bool = False) -> None:
        """Done or failed for good: scale the group to zero, then let this instance go as well (it is
        next to drain: its hook is completed as soon as the group picks it). With `keep_instance` (the
        newest checkpoint is only on this disk) the hook is left to time out, so there is time to copy it."""
        group = self._own_group()
        group.scale_to_zero()
        self.log(message)
        if keep_instance and self.config.lifecycle_hook:
            self.log(f"this instance is kept until its lifecycle hook {self.config.lifecycle_hook} times out: "
                     f"copy what {self.config.checkpoint_dir} holds before then")
            return
        if keep_instance:
            self.log(f"no lifecycle hook keeps this instance: copy what {self.config.checkpoint_dir} holds now")
        group.release(SCALE_IN_WAIT_SECONDS, self.config.poll_seconds, self.stop_requested)

    def _save_watch(self) -> SaveWatch:
        def warn(message: str) -> None:
            if self.config.distributed and self.clients.store.latest_step() is not None:
                return  # rank 0 writes on another node, and S3 shows it has saved
            self.telemetry.warn(message)

        # A look through the working directory every dozen polls: once a minute at the default 5 s.
        return SaveWatch(Path(self.config.checkpoint_dir), self.config.save_warn_seconds, warn,
                         workdir=Path(self.config.workdir) if self.config.workdir else None,
                         look_every_seconds=12 * self.config.poll_seconds)

    def _own_group(self) -> OwnGroup:
        return OwnGroup(self.config.asg_name, self.config.lifecycle_hook, self.instance_id,
                        self.clients.imds, self.clients.autoscaling, self.log)

    # ---- small accessors ----------------------------------------------------------------------
    def _world(self) -> World:
        return World(self.config, self.clients.store, self.clients.imds, self.stop_requested, self.log)

    def _require_reporter(self) -> StatusReporter:
        assert self.telemetry.reporter is not None, "status is created once the lease is held"
        return self.telemetry.reporter

    def log(self, line: str) -> None:
        self.telemetry.log(line)


def install_stop_handlers(agent: Agent) -> None:
    """SIGTERM/SIGINT (systemd stop, shutdown) are handled like a notice: checkpoint, upload, exit."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: agent.stop_requested.set())
