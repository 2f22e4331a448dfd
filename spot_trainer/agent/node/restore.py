"""Where the command starts from: the newest whole checkpoint on this disk or in S3, made ready.

At start the newer of this disk's newest provably whole checkpoint and S3's newest that restores wins
(latest.json naming a step that cannot be restored is pointed at the one that could); what sits above
the restore point is set aside, and before each start what a dead writer left half-written goes aside.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ...storage.checkpoint_versions import step_text
from ...storage.files import staging
from ...storage.record_kinds import EventKind
from ...storage.saves import layouts
from ...storage.saves.layouts import Checkpoint
from ...storage.saves.shards import NodeRanks
from ...storage.steps.other_regions import CrossedBytes, OtherRegions
from ...storage.steps.remote import RemoteStore, RemoteStoreError
from ..records.telemetry import RunTelemetry


@dataclass(frozen=True)
class StartPoint:
    resume_from: Checkpoint | None  # None: a fresh start
    remote_step: int | None  # the step S3 holds (latest.json, settled): the uploader's floor


@dataclass
class Restore:
    directory: Path  # CHECKPOINT_DIR
    store: RemoteStore
    telemetry: RunTelemetry
    builtin: bool  # the built-in trainer always writes a COMMITTED marker: for it nothing else counts
    elsewhere: OtherRegions | None = None  # a job of several regions: its buckets in the others

    @property
    def before_a_round(self) -> NodeRanks | None:
        """What a restore fetches of a sharded step: all of it (None)."""
        return None

    def at_start(self) -> StartPoint:
        """The checkpoint to resume from, and the step latest.json held (read once, here)."""
        directory = self.directory
        directory.mkdir(parents=True, exist_ok=True)
        if leftovers := staging.remove_leftovers(directory):
            self.telemetry.log(f"removed {', '.join(leftovers)}, left by an upload cut short")
        remote_step = self.store.latest_step()
        local = self.newest_at_start()
        here = max((step for step in (remote_step, local.step if local else None) if step is not None), default=None)
        crossed = self._restore_from_another_region(here)
        if crossed is not None:
            restored: Checkpoint | None = crossed
            remote_step = crossed.step  # S3 holds it, in the region it came from: newer saves only go up
        elif local is not None and (remote_step is None or local.step >= remote_step):
            restored = local  # this disk survived (agent restart): it is at least as new
        else:
            started = time.monotonic()
            # At the step S3's record gives, not the name's: a series member alone on this disk is no series yet.
            restored = self.store.restore_checkpoint(directory, remote_step, self.before_a_round)
            if restored is not None:
                self.telemetry.log(f"restored {restored.path.name} from S3 in {time.monotonic() - started:.2f}s")
            remote_step = self._settle_fallback(remote_step, restored.step if restored else None)
        self.prepare(restored)
        self._set_aside_unverified(restored.step if restored else None)
        if restored is None:
            self.telemetry.log("no checkpoint yet: starting fresh")
            return StartPoint(None, remote_step)
        self.telemetry.log(f"resuming from checkpoint {step_text(restored.step)} ({restored.path.name})")
        self.telemetry.event(EventKind.RESUME, step=restored.step)
        self.telemetry.update(checkpoint_step=max(restored.step, remote_step or 0))
        return StartPoint(restored, remote_step)

    def _restore_from_another_region(self, floor: int | None) -> Checkpoint | None:
        """The job's newest step, when another region's bucket holds a higher one than this region's bucket
        and disk (the job trained there before it moved here): restored from there, across regions, once."""
        away = self.elsewhere.newest_above(floor) if self.elsewhere is not None else None
        if away is None:
            return None
        started, crossed = time.monotonic(), CrossedBytes.counting(away.store)
        restored = away.store.restore_checkpoint(self.directory, away.step, self.before_a_round)
        if restored is None:
            self.telemetry.log(f"step {away.step} of {away.region} (s3://{away.store.bucket}) could not be restored: "
                               "resuming from this region's newest")
            return None
        self.telemetry.log(f"restored {restored.path.name} from {away.region} (s3://{away.store.bucket}), across "
                           f"regions: {crossed.total} bytes in {time.monotonic() - started:.2f}s")
        self.telemetry.event(EventKind.REGION_RESTORE, step=restored.step, region=away.region, bytes=crossed.total)
        return restored

    def newest_at_start(self) -> Checkpoint | None:
        """This disk's newest checkpoint, strictly read: it may win over S3 only when its content proves it
        whole."""
        return layouts.newest_complete(self.directory, writer_done=True, strict=True)

    def newest(self, *, writer_done: bool) -> Checkpoint | None:
        """The newest complete checkpoint on this disk (strictly read for the built-in trainer)."""
        return layouts.newest_complete(self.directory, writer_done=writer_done, strict=self.builtin)

    def restart_point(self, resume_from: Checkpoint | None) -> Checkpoint | None:
        """The newest whole checkpoint on this disk (else what the last run was given), made ready."""
        resume_from = self.newest(writer_done=True) or resume_from
        self.prepare(resume_from)
        return resume_from

    def prepare(self, resume_from: Checkpoint | None) -> None:
        """What a dead writer left half-written goes aside, so the framework resumes from `resume_from`."""
        hidden = layouts.prepare_for_resume(self.directory, resume_from.path if resume_from else None)
        if hidden:
            self.telemetry.log(f"moved aside unfinished checkpoints {', '.join(hidden)} "
                               f"(as {layouts.INCOMPLETE_PREFIX}<name>)")

    def _settle_fallback(self, named: int | None, restored: int | None) -> int | None:
        """latest.json named a step that could not be restored: what is really in S3 is the step that
        was (the uploader's floor, and what "safe in S3" may say), and latest.json is pointed at it so
        the steps trained again are published."""
        if named is None or restored == named:
            return named
        if not self._proven_damaged(named):  # S3 failed to answer: no proof latest.json is wrong
            return named
        if restored is not None and self.store.repoint(restored, named):
            self.telemetry.log(f"latest.json named step {named}, which could not be restored: it now names "
                               f"step {restored}")
        elif restored is None:
            self.telemetry.log(f"latest.json names step {named}, but no checkpoint in S3 could be restored")
        return restored

    def _proven_damaged(self, step: int) -> bool:
        """A restore proved the step damaged, or S3 says it has no manifest."""
        if step in self.store.damaged_steps:
            return True
        try:
            return not self.store.has_checkpoint(step)
        except RemoteStoreError:
            return False

    def _set_aside_unverified(self, restored_step: int | None) -> None:
        """Whatever sits above the restore point was not proven whole: it must neither be resumed
        from nor published (a stray `step-00000099` would otherwise outrank every real step)."""
        above = layouts.set_aside_above(self.directory, restored_step)
        if above:
            hint = " (a checkpoint of the built-in trainer carries a COMMITTED marker)" if self.builtin else ""
            self.telemetry.log(f"set aside {', '.join(above)} in CHECKPOINT_DIR (as "
                               f"{layouts.UNVERIFIED_PREFIX}<name>): newer than the restore point, and nothing "
                               f"proves it complete{hint}")
            self.telemetry.event(EventKind.SET_ASIDE, names=above)
