"""What an instance's training did, as the run goes on: the progress lines of its journal and the
events of its agent.

The agent copies the command's stdout into the unit's journal: the progress lines of
spot_trainer/progress.py (step, checkpoint, resumed, emergency_checkpoint, done), which the built-in
trainer and the framework callbacks print, a protocol read here. What the agent itself did is read
from its events (localcloud/agent_events.py), never from its log lines, which are worded for people:
when it took up training, fresh or from a checkpoint, each checkpoint it published (all the progress a
command that prints no steps, an unmodified script, shows), the rounds of several nodes it was in and
the step a round resumed from, and whether it waited for the lease. A journal line is stamped when it
is read, within one player tick of when it was written; an event carries the moment it happened.

Each (re)start of training on the instance opens a stretch: the step it resumed from, the steps it
showed after that and when. A node of a world that re-forms after a loss trains in several stretches;
the report puts the stretches of every instance together (localcloud/work.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spot_trainer.storage.checkpoint_versions import is_version

# The agent's events read here (written by the rooms of spot_trainer/agent/, and by the launcher of several
# nodes, spot_trainer/distributed/round_start.py).
# An agent's "start" (it took up the job: the lease, or its place in a world of several nodes) opens a
# stretch at step 0, and its "resume" (it restored checkpoint `step`) moves it, as `status` counts them
# (spot_trainer.costs.redone_work): a start that shows progress with no resume after it started fresh.
STARTED = "start"
RESUMED = "resume"
UPLOADED = "checkpoint"  # uploaded checkpoint `step`; `published`: latest.json names it
LEASE_WAIT = "lease_wait"  # a standby: another agent holds the lease
# Several nodes: each round's size (`nodes`), and the `step` every node of a command of the user's own
# resumes from when the round forms (torchrun restarts the workers; the agent does not restart the command).
ROUND_FORMED = "round"
ROUND_RESUMED = "round_resume"


@dataclass
class Stretch:
    """Training from one (re)start on one instance: from the step it resumed at to the last it showed."""

    started: float  # when the restart was seen
    first_step: int  # the step it resumed from (0: a fresh start)
    last_step: int
    first_seen_step: int | None = None  # the first step it showed, and when
    first_step_at: float | None = None
    last_step_at: float | None = None

    @property
    def steps(self) -> int:
        return max(0, self.last_step - self.first_step)

    @property
    def timed_steps(self) -> int:
        """The steps between its first and last step line: the ones `seconds` covers."""
        return 0 if self.first_seen_step is None else max(0, self.last_step - self.first_seen_step)

    @property
    def seconds(self) -> float:
        if self.first_step_at is None or self.last_step_at is None:
            return 0.0
        return self.last_step_at - self.first_step_at


@dataclass
class TrainingLog:
    path: Path
    offset: int = 0
    _partial: str = ""
    max_step: int | None = None
    loss: float | None = None
    resumed_step: int | None = None
    started_fresh: bool = False  # it showed progress from an agent's start with nothing restored
    first_step_at: float | None = None
    last_step_at: float | None = None
    stall_seconds: float = 0.0  # training time spent inside checkpoint saves
    checkpoints: int = 0
    emergency_step: int | None = None
    done: bool = False
    waited_for_lease: bool = False
    agent_started_at: float | None = None  # when its agent took up the job
    reports_steps: bool = False  # the command prints step lines (else progress is its checkpoints)
    versions_seen: int = 0  # checkpoints that state no step (they go by version) that went up
    stall_measured: bool = False  # its checkpoint lines carry the time training stalled
    stretches: list[Stretch] = field(default_factory=list)  # one per (re)start, in order
    round_nodes: int = 0  # the most nodes a round this instance was in had
    _fresh_unless_restored: bool = False  # the open stretch is an agent's start, nothing restored since

    def poll(self, now: float | None = None) -> bool:
        """The journal alone: the lines appended since the last poll, stamped `now`."""
        return self.take(self.new_lines(), [], now if now is not None else time.time())

    def new_lines(self) -> list[str]:
        """The whole lines appended to the journal since the last call."""
        try:
            with open(self.path, "rb") as journal:
                journal.seek(self.offset)
                chunk = journal.read()
        except OSError:
            return []
        self.offset += len(chunk)
        lines = (self._partial + chunk.decode(errors="replace")).split("\n")
        self._partial = lines.pop()
        return [line.strip() for line in lines]

    def take(self, lines: Iterable[str], events: Iterable[Mapping[str, Any]], stamp: float) -> bool:
        """Journal lines read at `stamp` and the agent's events, in the order they happened; True when a
        new step was seen. An event's PUT is done before its agent goes on, so one that precedes a line is
        listed by the time that line is read (the player reads the journals, then the events) and sorts
        before it. A line written before an event but read after it sorts after it: a step line read
        together with the restart after it, which comes a rendezvous or an agent restart later."""
        before = self.max_step
        timed = [(float(event["epoch"]), 0, event) for event in events] + [(stamp, 1, line) for line in lines]
        for at, _, entry in sorted(timed, key=lambda item: item[:2]):
            if isinstance(entry, str):
                self._read_line(entry, at)
            else:
                self._read_event(entry, at)
        return self.max_step != before

    def _read_line(self, line: str, stamp: float) -> None:
        if not line.startswith("{"):
            return  # the agent's lines, the command's own: for people
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind, step = event.get("event"), event.get("step")
        if kind == "resumed" and isinstance(step, int):
            self.resumed_step = step
            self._restarted(stamp, step)
        elif kind == "step" and isinstance(step, int):
            self.reports_steps = True
            self._saw_step(step, stamp)
            if isinstance(event.get("loss"), (int, float)):
                self.loss = float(event["loss"])
        elif kind in ("checkpoint", "emergency_checkpoint") and isinstance(step, int):
            self._saw_step(step, stamp)
            self.stall_seconds += float(event.get("stall_s") or 0.0)
            self.stall_measured = self.stall_measured or "stall_s" in event
            self.checkpoints += 1
            if kind == "emergency_checkpoint":
                self.emergency_step = step
        elif kind == "done":
            self.done = True

    def _read_event(self, event: Mapping[str, Any], at: float) -> None:
        kind, step = event.get("kind"), event.get("step")
        if kind == LEASE_WAIT:
            self.waited_for_lease = True
        elif kind == STARTED:
            self.agent_started_at = self.agent_started_at or at
            self._restarted(at, 0)
            self._fresh_unless_restored = True
        elif kind == RESUMED and isinstance(step, int):
            if self.resumed_step is None:
                self.resumed_step = step
            self._restarted(at, step)  # a command printing no progress lines resumes only here
        elif kind == ROUND_FORMED and isinstance(event.get("nodes"), int):
            self.round_nodes = max(self.round_nodes, event["nodes"])
        elif kind == ROUND_RESUMED and isinstance(step, int):
            self._restarted(at, step)
        elif kind == UPLOADED and event.get("published") and isinstance(step, int) and is_version(step):
            self._saw_version(at)  # a checkpoint that states no step: progress in time, no step seen
        elif kind == UPLOADED and event.get("published") and isinstance(step, int) and not self.reports_steps:
            # The hand-over of the step a round resumes from can be uploaded after the round's start: not trained.
            if not self.stretches or step > self.stretches[-1].first_step:
                self._saw_step(step, at)

    def _restarted(self, stamp: float, step: int) -> None:
        """Training starts again. The agent's start, its restore, then the built-in trainer's own event,
        are one restart, and the last is the one that counts: a node joining a world restores at boot,
        while the world still trains, and resumes with it from the world's newer checkpoint when the world
        re-forms."""
        self._fresh_unless_restored = False
        if self.stretches and self.stretches[-1].first_seen_step is None:
            self.stretches.pop()
        self.stretches.append(Stretch(started=stamp, first_step=step, last_step=step))

    def _saw_version(self, stamp: float) -> None:
        """A new version went up: the instance trains (its schedule counts from here), at a step nobody knows."""
        self.versions_seen += 1
        if self.first_step_at is None:
            self.first_step_at = stamp
        self.last_step_at = stamp

    def _saw_step(self, step: int, stamp: float) -> None:
        if not self.stretches:
            self._restarted(stamp, self.resumed_step or 0)
        stretch = self.stretches[-1]
        self.started_fresh = self.started_fresh or self._fresh_unless_restored
        if stretch.first_seen_step is None:
            stretch.first_seen_step, stretch.first_step_at = step, stamp
        stretch.last_step, stretch.last_step_at = max(step, stretch.last_step), stamp
        if self.first_step_at is None:
            self.first_step_at = stamp
        self.last_step_at = stamp
        if self.max_step is None or step > self.max_step:
            self.max_step = step

    @property
    def steps_run(self) -> int:
        """Steps this instance computed, over all its (re)starts."""
        return sum(stretch.steps for stretch in self.stretches)


def training_again_after(logs: list[TrainingLog], moment: float) -> float | None:
    """When any instance first stepped after resuming at or after `moment` (None: never)."""
    times = [stretch.first_step_at for log in logs for stretch in log.stretches
             if stretch.first_step_at is not None and stretch.started >= moment]
    return min(times) if times else None
