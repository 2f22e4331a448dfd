"""Several nodes: this node's part of each checkpoint DCP wrote in shards (storage/steps/step_parts.py).

Every node uploads its own part, whichever node publishes whole checkpoints in the round: the node
holding `.metadata` (the coordinator's) as soon as that file is there, any other node once the
coordinator's record in S3 shows the save ended on every rank (its own shards are written in place,
so nothing on its disk says so). Each part a node sent is followed until its step is published: a save
whole in S3 whose publish S3 failed is published again at each poll (by the node that settled it, and by
every node once the settling is FINISH_TAKEOVER_SECONDS old) until it is, or for PUBLISH_RETRY_SECONDS,
then given up in one line; a step still not whole PARTS_ARRIVAL_SECONDS later is abandoned in one line
naming the ranks whose shards never arrived, and its objects are removed.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...storage.record_kinds import EventKind
from ...storage.saves import layouts, shards
from ...storage.steps.checkpoint_files import checkpoint_files
from ...storage.steps.remote import RemoteStoreError
from ...storage.steps.step_parts import StepParts
from ...storage.steps.step_publish import FINISH_TAKEOVER_SECONDS, PARTS_ARRIVAL_SECONDS, SaveOutcome

# After the command stopped, for the coordinator's record of this node's newest save: rank 0's node sends
# its .metadata first, within a poll or two; a save cut short never gets one, and the wait costs the round.
PART_WAIT_SECONDS = 30.0
# A save whole in S3 whose MANIFEST.json or latest.json S3 keeps failing: retried each poll this long.
PUBLISH_RETRY_SECONDS = 600.0


@dataclass
class ShardedSaves:
    parts: StepParts
    directory: Path
    log: Callable[[str], None]
    event: Callable[..., None]
    arrival_seconds: float = PARTS_ARRIVAL_SECONDS
    publish_seconds: float = PUBLISH_RETRY_SECONDS
    takeover_seconds: float = FINISH_TAKEOVER_SECONDS
    _publish_failed: dict[int, str] = field(default_factory=dict)  # step → the last publish failure said
    _said: str = ""  # the last failure to look for a part, said once

    def ready(self, *, writer_done: bool, above: int | None) -> layouts.Checkpoint | None:
        """The newest sharded checkpoint above `above` whose part on this disk may go up now (None, said in
        one line, when the disk or S3 cannot tell now: asked again at the next poll)."""
        try:
            return self._ready(writer_done=writer_done, above=above)
        except Exception as error:  # noqa: BLE001 - a vanished folder, a damaged record: never the agent's end
            if (said := f"{type(error).__name__}: {error}") != self._said:
                self.log(f"could not look for this node's part of a sharded save ({said})")
                self._said = said
            return None

    def _ready(self, *, writer_done: bool, above: int | None) -> layouts.Checkpoint | None:
        newer = [found for found in layouts.checkpoints_in(self.directory) if above is None or found.step > above]
        if not any(shards.is_sharded(found.path) for found in newer):  # each poll of a job saving whole files
            return None
        own = self.coordinator_part(writer_done=writer_done)
        candidates = [own] if own is not None else []
        if (pending := self.pending_here(above)) is not None and self._coordinator_sent(pending):
            candidates.append(pending)
        newest = max(candidates, key=lambda found: found.step, default=None)
        return newest if newest is not None and (above is None or newest.step > above) else None

    def coordinator_part(self, *, writer_done: bool) -> layouts.Checkpoint | None:
        """The newest save this disk holds as its coordinator: S3 must hold it before the job is DONE."""
        own = layouts.newest_complete(self.directory, writer_done=writer_done, shards_elsewhere=True)
        return own if own is not None and shards.holds_metadata(own.path) else None

    def pending_here(self, above: int | None) -> layouts.Checkpoint | None:
        """The newest shards this disk holds without `.metadata`, above `above`: a part that goes up once the
        coordinator's record of their save is in S3."""
        newest = next(iter(layouts.checkpoints_in(self.directory)), None)
        if newest is None or (above is not None and newest.step <= above):
            return None
        return newest if shards.is_sharded(newest.path) and not shards.holds_metadata(newest.path) else None

    def _coordinator_sent(self, pending: layouts.Checkpoint) -> bool:
        """The coordinator's record of the save these shards belong to is in S3 (one of an earlier save of
        the same step, written before them, is not theirs)."""
        try:
            save = self.parts.coordinator_save(pending.step)
        except RemoteStoreError:  # S3 having a bad minute: asked again at the next poll
            return False
        if save is None:
            return False
        files = {name: path for name, path in checkpoint_files(pending.path).items() if name in save.listed}
        return bool(files) and not save.refusal(files)

    def check(self, latest: Callable[[], int | None]) -> None:
        """Each poll: a part sent whose step is published is done with; a whole save is published, its publish
        retried when S3 failed it; one not whole in time is abandoned."""
        awaiting = self.parts.awaiting_publish()
        if not awaiting:
            return
        try:
            published = latest()
            if published is not None:
                self.prune_set_aside(published)
            for step, since in sorted(awaiting.items()):
                if published is not None and published >= step:
                    self._forget(step)
                else:
                    self._follow(step, since)
        except Exception as error:  # noqa: BLE001 - S3, a disk or a damaged record: asked again at the next poll
            self.log(f"could not check the sharded steps sent ({type(error).__name__}: {error})")

    def _follow(self, step: int, since: float) -> None:
        identity = self.parts.sent.get(step)
        settled = self.parts.settlement(step, identity) if identity is not None else None
        if settled is None:
            if self.parts.publish_if_whole(step):
                self._forget(step)
            elif time.monotonic() - since > self.arrival_seconds and not self._settled_meanwhile(step, identity):
                self._abandon(step)
                self._forget(step)
            return
        if settled.get("outcome") != SaveOutcome.PUBLISHED or identity is None:
            self._forget(step)  # abandoned: the node that settled it said so
            return
        age = time.time() - float(settled.get("settled_at") or 0.0)
        if settled.get("instance") != self.parts.store.instance and age < self.takeover_seconds:
            return  # its publisher is on it
        try:
            finished = self.parts.finish(step, identity)
        except RemoteStoreError as error:
            if age > self.publish_seconds:
                self.log(f"checkpoint step {step} abandoned: it is whole in S3, but S3 refused its MANIFEST.json or "
                         f"latest.json for {self.publish_seconds:.0f}s ({error.cause or error}); its objects are left "
                         "to retention, and the step published before it stands")
                self.event(EventKind.ABANDONED, step=step, missing="its publish", removed=False)
                self._forget(step)
            elif self._publish_failed.get(step) != (said := error.cause or str(error)):
                self._publish_failed[step] = said
                self.log(f"checkpoint step {step} is whole in S3 but not published yet: S3 failed its publish "
                         f"({said}); retried at each poll")
            return
        if finished and step in self._publish_failed:
            self.log(f"checkpoint step {step} published (its publish retried after S3 failed it)")
        self._forget(step)

    def _settled_meanwhile(self, step: int, identity: str | None) -> bool:
        return identity is not None and self.parts.settlement(step, identity) is not None

    def prune_set_aside(self, published: int) -> list[str]:
        """Shards set aside as a round began (`.unverified-<name>`, `.incomplete-<name>`) below the step now
        published are of no use any more: a node's own shards of every save would pile up on its disk."""
        removed = []
        for entry in self.directory.iterdir() if self.directory.is_dir() else []:
            step = layouts.set_aside_step(entry)  # the published step's own copy may be linked into a restore
            if step is not None and step < published and not entry.is_symlink() and shards.is_sharded(entry):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
        return removed

    def _abandon(self, step: int) -> None:
        missing = self.parts.missing_parts(step)
        removed = self.parts.abandon(step)
        kept = ("its objects were removed" if removed else
                "its objects are left to retention (another save of it began, or another node settled it)")
        self.log(f"checkpoint step {step} abandoned: {missing} did not reach S3 within {self.arrival_seconds:.0f}s "
                 f"of this node's part; {kept}, and the step published before it stands")
        self.event(EventKind.ABANDONED, step=step, missing=missing, removed=removed)

    def _forget(self, step: int) -> None:
        self.parts.stop_awaiting(step)
        self._publish_failed.pop(step, None)

    def awaited(self, step: int) -> str:
        """Why `step` is not published yet, for a line: the parts still missing."""
        try:
            return f"waiting for {self.parts.missing_parts(step)}"
        except RemoteStoreError as error:
            return f"S3 could not say which parts are missing ({error})"


def wait_for_part(saves: ShardedSaves, above: int | None, bound: float, stop: threading.Event,
                  poll_seconds: float) -> layouts.Checkpoint | None:
    """After the command stopped: this disk's newest shards go up once the coordinator's record shows the
    save ended everywhere; waited for up to `bound`, since a save cut short never gets one."""
    deadline = time.monotonic() + bound
    while saves.pending_here(above) is not None:  # the coordinator's own part is ready at once
        if (found := saves.ready(writer_done=True, above=above)) is not None:
            return found
        if time.monotonic() >= deadline or stop.wait(poll_seconds):
            return None
    return saves.ready(writer_done=True, above=above)

