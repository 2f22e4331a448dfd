"""A per-region spot capacity plan, and the board that hands it to moto's server.

`--outage us-east-1:step30:900` takes us-east-1's spot capacity away for 900 s from the moment S3 holds
step 30 (`us-east-1:40:90`: from 40 s into the run), as --spot-outage does for one region
(localcloud/outages.py). `--score us-west-2:3` sets a region's placement score while it has capacity.
The player places the outages in time as the run goes and writes them to a small JSON board; moto's
server reads the board on every call it answers from it (localcloud/moto_regions.py): the placement
scores, the failed launches a group reports while its region has no capacity, and a region's spot price
where the board names one.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from localcloud.interruptions import PlanError
from localcloud.outages import OutageClock, SpotOutage, parse_outage

BOARD_ENV = "LOCALCLOUD_CAPACITY_BOARD"  # the board's path, in moto's server's environment
SCORE_WITH_CAPACITY = 9
SCORE_IN_OUTAGE = 1
SCORE_RECOVERING = 5  # within RECOVERY_SECONDS of an outage's end: capacity is back but thin
RECOVERY_SECONDS = 600.0


@dataclass(frozen=True)
class RegionOutage:
    region: str
    outage: SpotOutage


def parse_region_outage(text: str) -> RegionOutage:
    """'us-east-1:step30:900' or 'us-east-1:40:90': a region, then --spot-outage's START:LENGTH."""
    region, colon, rest = text.partition(":")
    if not colon or not region:
        raise PlanError(f"--outage {text!r}: expected REGION:START:LENGTH, like us-east-1:40:90 "
                        "or us-east-1:step30:900")
    try:
        return RegionOutage(region, parse_outage(rest))
    except PlanError as error:
        raise PlanError(f"--outage {text!r}: after the region, {str(error).partition(': ')[2]}") from None


def parse_region_score(text: str) -> tuple[str, int]:
    """'us-west-2:3' → us-west-2 scores 3 while it has capacity."""
    region, _, score = text.partition(":")
    if not region or not score.isdigit() or not 1 <= int(score) <= 10:
        raise PlanError(f"--score {text!r}: expected REGION:SCORE with a score of 1 to 10, like us-west-2:3")
    return region, int(score)


@dataclass(frozen=True)
class Window:
    """No spot capacity in `region` from `start` to `end` (epoch seconds)."""

    region: str
    start: float
    end: float


@dataclass(frozen=True)
class Board:
    """What moto's server answers from: the placed outages and the regions' scores with capacity."""

    windows: tuple[Window, ...] = ()
    scores: dict[str, int] = field(default_factory=dict)
    prices: dict[str, float] = field(default_factory=dict)  # a region's spot price of every type (moto's: one)

    def has_capacity(self, region: str, at: float) -> bool:
        return not any(w.region == region and w.start <= at < w.end for w in self.windows)

    def score(self, region: str, at: float) -> int:
        """1 in an outage, 5 for ten minutes after one, else the region's own score (9 unless set)."""
        if not self.has_capacity(region, at):
            return SCORE_IN_OUTAGE
        if any(w.region == region and w.end <= at < w.end + RECOVERY_SECONDS for w in self.windows):
            return min(SCORE_RECOVERING, self.scores.get(region, SCORE_WITH_CAPACITY))
        return self.scores.get(region, SCORE_WITH_CAPACITY)

    def to_json(self) -> str:
        return json.dumps({"windows": [vars(w) for w in self.windows], "scores": self.scores, "prices": self.prices})

    @classmethod
    def from_json(cls, text: str) -> Board:
        data = json.loads(text)
        return cls(tuple(Window(**w) for w in data.get("windows", [])), dict(data.get("scores", {})),
                   dict(data.get("prices", {})))

    def write(self, path: Path) -> None:
        """Whole or not at all: moto's server may read it at any moment."""
        partial = path.with_name(path.name + ".partial")
        partial.write_text(self.to_json())
        os.replace(partial, path)


def read_board(path: str | None) -> Board:
    """The board moto's server was given, or one with capacity everywhere."""
    if not path:
        return Board()
    try:
        return Board.from_json(Path(path).read_text())
    except FileNotFoundError:
        return Board()


@dataclass
class RegionPlan:
    """The run's outages per region as the player places them in time; each placement rewrites the board."""

    outages: list[RegionOutage]
    scores: dict[str, int]
    board_path: Path
    started_at: float = field(default_factory=time.time)
    _clocks: dict[str, OutageClock] = field(init=False)

    def __post_init__(self) -> None:
        regions = {o.region for o in self.outages}
        self._clocks = {r: OutageClock([o.outage for o in self.outages if o.region == r]) for r in regions}
        self.board().write(self.board_path)

    def advance(self, now: float, latest_step: int | None) -> list[str]:
        """The clock moved to `now` (S3 holding `latest_step`): the regions whose outage began since the last move."""
        begun = [r for r, clock in self._clocks.items() if clock.advance(now - self.started_at, latest_step)]
        self.board().write(self.board_path)
        return begun

    def board(self) -> Board:
        windows = tuple(Window(region, self.started_at + o.start, self.started_at + o.start + o.length)
                        for region, clock in self._clocks.items() for o in clock.placed())
        return Board(windows, dict(self.scores))

