"""What an instance's training did, read from its journal as the run goes on.

The agent copies the command's stdout into the unit's journal: the progress lines of
trainer/progress.py (step, checkpoint, resumed, emergency_checkpoint, done), which the built-in
trainer and the framework callbacks print. Beside them are the agent's own lines: when the command
started, the step it resumed from and each checkpoint it uploaded, which are all the progress a
command that prints no steps (an unmodified script) shows. Each line is stamped when it is read,
within one player tick of when it was written.

Each (re)start of training on the instance opens a stretch: the step it resumed from, the steps it
showed after that and when. A node of a world that re-forms after a loss trains in several stretches;
the report puts the stretches of every instance together (localcloud/work.py).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

LEASE_WAIT = "another agent holds the job lease"
AGENT_RESUMED = re.compile(r"spot-trainer: resuming from checkpoint step (\d+)")
AGENT_UPLOADED = re.compile(r"spot-trainer: checkpoint step (\d+) uploaded")
AGENT_STARTED = "spot-trainer: starting "
# Several nodes: each round's size, and the step every node of a command of the user's own resumes from
# when the round forms (torchrun restarts the workers; the agent does not restart the command).
ROUND_FORMED = re.compile(r"spot-trainer: round \d+: (\d+) node\(s\)")
ROUND_RESUMED = re.compile(r"spot-trainer: this round resumes from step (\d+)")


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
    started_fresh: bool = False
    first_step_at: float | None = None
    last_step_at: float | None = None
    stall_seconds: float = 0.0  # training time spent inside checkpoint saves
    checkpoints: int = 0
    emergency_step: int | None = None
    done: bool = False
    waited_for_lease: bool = False
    command_started_at: float | None = None
    reports_steps: bool = False  # the command prints step lines (else progress is its checkpoints)
    stall_measured: bool = False  # its checkpoint lines carry the time training stalled
    stretches: list[Stretch] = field(default_factory=list)  # one per (re)start, in order
    round_nodes: int = 0  # the most nodes a round this instance was in had

    def poll(self, now: float | None = None) -> bool:
        """Read what was appended since the last poll; True when a new step was seen."""
        try:
            with open(self.path, "rb") as journal:
                journal.seek(self.offset)
                chunk = journal.read()
        except OSError:
            return False
        if not chunk:
            return False
        self.offset += len(chunk)
        text = self._partial + chunk.decode(errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()
        stamp = now if now is not None else time.time()
        before = self.max_step
        for line in lines:
            self._read_line(line.strip(), stamp)
        return self.max_step != before

    def _read_line(self, line: str, stamp: float) -> None:
        if not line.startswith("{"):
            self._read_agent_line(line, stamp)
            return
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

    def _read_agent_line(self, line: str, stamp: float) -> None:
        if LEASE_WAIT in line:
            self.waited_for_lease = True
        elif "no checkpoint yet: starting fresh" in line:
            self.started_fresh = True
            self._restarted(stamp, 0)
        elif line.startswith(AGENT_STARTED) and self.command_started_at is None:
            self.command_started_at = stamp
        elif match := AGENT_RESUMED.search(line):
            if self.resumed_step is None:
                self.resumed_step = int(match.group(1))
            self._restarted(stamp, int(match.group(1)))  # a command printing no events resumes only here
        elif match := ROUND_FORMED.search(line):
            self.round_nodes = max(self.round_nodes, int(match.group(1)))
        elif match := ROUND_RESUMED.search(line):
            self._restarted(stamp, int(match.group(1)))
        elif (match := AGENT_UPLOADED.search(line)) and not self.reports_steps:
            step = int(match.group(1))
            # The hand-over of the step a round resumes from can be logged after the round's start: not trained.
            if not self.stretches or step > self.stretches[-1].first_step:
                self._saw_step(step, stamp)

    def _restarted(self, stamp: float, step: int) -> None:
        """Training starts again. The agent's restore, then the built-in trainer's own event, are one
        restart, and the later is the one that counts: a node joining a world restores at boot, while the
        world still trains, and resumes with it from the world's newer checkpoint when the world re-forms."""
        if self.stretches and self.stretches[-1].first_seen_step is None:
            self.stretches.pop()
        self.stretches.append(Stretch(started=stamp, first_step=step, last_step=step))

    def _saw_step(self, step: int, stamp: float) -> None:
        if not self.stretches:
            self._restarted(stamp, self.resumed_step or 0)
        stretch = self.stretches[-1]
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
