"""The live progress line: a bar of steps done, loss, the instance training (or, when several train
as one, every node training and the world size), interruptions so far.

On a terminal the line redraws in place (carriage return); elsewhere (CI logs, pipes) a line is
printed only when something changes, at most every few seconds, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from localcloud.instance import Instance
from localcloud.journal import TrainingLog
from localcloud.player import Player

BAR_WIDTH = 28
WORLD_WINDOW_SECONDS = 5.0  # a node that stepped this recently is part of the world training now


def bar(done: int, total: int | None, width: int = BAR_WIDTH) -> str:
    if not total:
        return "[" + "?" * width + "]"
    filled = min(width, round(width * done / total))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def describe(player: Player) -> str:
    step = player.current_step() or 0
    total = player.options.total_steps
    current = player.training_instance()
    loss = player.logs[current.instance_id].loss if current else None
    alive = player.alive()
    counted = f"{step}/{total}" if total else f"{step}"
    world = training_nodes(alive, player.logs, time.time())
    who = (f"nodes {' '.join(node.instance_id for node in world)}  world {len(world)}" if len(world) > 1
           else f"instance {current.instance_id if current else '(booting)'}")
    return (f"{bar(step, total)} step {counted}  loss {'-' if loss is None else f'{loss:.4f}'}  "
            f"{who}  live {len(alive)}  "
            f"interruptions {len(player.interruptions)}  {time.time() - player.started_at:5.0f}s")


def training_nodes(alive: list[Instance], logs: dict[str, TrainingLog], now: float) -> list[Instance]:
    """The instances that stepped within the last few seconds: the world training right now."""
    return [node for node in alive if (at := logs[node.instance_id].last_step_at) is not None
            and now - at < WORLD_WINDOW_SECONDS]


@dataclass
class ProgressLine:
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    min_interval: float = 5.0
    _last: str = ""
    _printed_at: float = 0.0
    _width: int = 0

    def __call__(self, player: Player) -> None:
        line = describe(player)
        if self.stream.isatty():
            padding = " " * max(0, self._width - len(line))
            self.stream.write("\r" + line + padding)
            self.stream.flush()
            self._width = len(line)
            return
        changed = line.split("  ")[:-1] != self._last.split("  ")[:-1]
        if changed and time.monotonic() - self._printed_at >= self.min_interval:
            print(line, file=self.stream, flush=True)
            self._last, self._printed_at = line, time.monotonic()

    def message(self, text: str) -> None:
        """A log line that must not be overwritten by the next redraw."""
        if self.stream.isatty() and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        print(text, file=self.stream, flush=True)
