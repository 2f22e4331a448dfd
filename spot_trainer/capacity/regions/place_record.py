"""`<job>/regions.json` in the home region's bucket: where the controller last put the job, the moves it made,
its cached placement scores and spot prices, and what it saw of each region; written once a minute, read by `status`.

Which region trains is the groups' own: the one whose desired capacity is above 0. The record adds what the
groups cannot say (the moves' history, the scores' age); a damaged or missing record loses only that, never
where the job is.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .moves import Move

RECORD_NAME = "regions.json"


@dataclass(frozen=True)
class RegionSeen:
    """One region as the controller saw it last: for `status`."""

    desired: int
    running: int
    score: int | None
    failure: str  # the newest failed launch's code and kind, or ""
    bucket: str = ""  # the job's bucket there: where `status` reads the job's record once it runs there


@dataclass(frozen=True)
class PlaceRecord:
    active: str
    active_since: float  # when the job became active there (the record's first write, or the move)
    last_running_at: float | None = None  # when an instance last ran in the active region
    moves: tuple[Move, ...] = ()
    scores_asked_at: float | None = None
    scores: dict[str, int] | None = None
    scores_limited: bool = False
    prices_asked_at: float | None = None
    prices: dict[str, float] = field(default_factory=dict)  # USD per instance-hour; a region absent has none
    reason: str = ""  # the newest decision's line
    regions: dict[str, RegionSeen] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()  # regions in the job file's order, home first

    @classmethod
    def from_json(cls, body: bytes) -> PlaceRecord:
        """ValueError naming what is wrong with a record this module did not write."""
        try:
            data = json.loads(body)
            return cls(
                active=str(data["active"]), active_since=float(data["active_since"]),
                last_running_at=_number(data.get("last_running_at")),
                moves=tuple(Move(float(m["at"]), str(m["source"]), str(m["target"]), str(m["reason"]))
                            for m in data.get("moves", [])),
                scores_asked_at=_number(data.get("scores_asked_at")),
                scores=None if data.get("scores") is None else {str(k): int(v) for k, v in data["scores"].items()},
                scores_limited=bool(data.get("scores_limited", False)),
                prices_asked_at=_number(data.get("prices_asked_at")),
                prices={str(k): float(v) for k, v in (data.get("prices") or {}).items()},
                reason=str(data.get("reason", "")),
                regions={str(k): RegionSeen(int(v["desired"]), int(v["running"]), _whole(v.get("score")),
                                            str(v.get("failure", "")), str(v.get("bucket", "")))
                         for k, v in data.get("regions", {}).items()})
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"{RECORD_NAME} is not a regions record ({type(error).__name__}: {error})") from None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _whole(value: Any) -> int | None:
    return None if value is None else int(value)
