"""The Spot placement score of the job's regions, asked for ONE stable configuration and cached.

AWS allows only a few distinct configurations per 24 hours and answers MaxConfigLimitExceeded beyond
them; a configuration asked for in the last 24 hours may be asked again
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-placement-score.html, "Limitations"). So a
job always asks the same question (its types and regions sorted, its node count as target capacity,
scores per Region), at most every POLL_SECONDS, and keeps the answer. While the limit answers, it
has no scores: the controller then decides on failed launches alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

POLL_SECONDS = 600.0  # AWS's scores move with capacity over minutes; 10-15 min keeps within the limit
LONGEST_POLL_SECONDS = 900.0
MAX_REGIONS = 10  # RegionNames takes at most 10
LIMIT_CODE = "MaxConfigLimitExceeded"


@dataclass(frozen=True)
class ScoreRequest:
    """The job's one configuration: GetSpotPlacementScores' arguments, the same on every poll."""

    instance_types: tuple[str, ...]
    target_capacity: int
    regions: tuple[str, ...]

    @classmethod
    def for_job(cls, instance_types: Iterable[str], nodes: int, regions: Iterable[str]) -> ScoreRequest:
        """Sorted, so the job file's order never makes a new configuration; ValueError naming what is wrong."""
        types, names = tuple(sorted(set(instance_types))), tuple(sorted(set(regions)))
        if not types:
            raise ValueError("a placement score needs at least one instance type")
        if nodes < 1:
            raise ValueError(f"a placement score's target capacity is the node count, at least 1, not {nodes}")
        if not 1 <= len(names) <= MAX_REGIONS:
            raise ValueError(f"a placement score scores 1 to {MAX_REGIONS} regions, not {len(names)}")
        return cls(types, nodes, names)

    def arguments(self) -> dict[str, Any]:
        return {"InstanceTypes": list(self.instance_types), "TargetCapacity": self.target_capacity,
                "TargetCapacityUnitType": "units", "SingleAvailabilityZone": False,
                "RegionNames": list(self.regions)}


class ScoreClient(Protocol):
    """An EC2 client (boto3's): the paginator of get_spot_placement_scores."""

    def get_paginator(self, operation_name: str) -> Any: ...


def error_code(error: BaseException) -> str | None:
    """The AWS error code a botocore ClientError carries (read by shape: stdlib only here)."""
    response = getattr(error, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, Mapping) else None


def read_scores(client: ScoreClient, request: ScoreRequest) -> dict[str, int]:
    """Every page's {Region, Score}: a region's best score (per-AZ answers name a region more than once)."""
    scores: dict[str, int] = {}
    for page in client.get_paginator("get_spot_placement_scores").paginate(**request.arguments()):
        for item in page.get("SpotPlacementScores", []):
            region, score = str(item["Region"]), int(item["Score"])
            scores[region] = max(score, scores.get(region, 0))
    return scores


@dataclass
class ScoreCache:
    """The newest answer and when it came; `limited` while AWS answers MaxConfigLimitExceeded."""

    request: ScoreRequest
    poll_seconds: float = POLL_SECONDS
    asked_at: float | None = None
    scores: dict[str, int] | None = None
    limited: bool = False
    pace: float = 1.0  # the local spot cloud's time runs this many times faster than AWS's

    def __post_init__(self) -> None:
        if not POLL_SECONDS <= self.poll_seconds <= LONGEST_POLL_SECONDS:
            raise ValueError(f"placement scores are polled every {POLL_SECONDS:g} to {LONGEST_POLL_SECONDS:g} s, "
                             f"not {self.poll_seconds:g}")

    def due(self, now: float) -> bool:
        return self.asked_at is None or now - self.asked_at >= self.poll_seconds / self.pace

    def current(self, client: ScoreClient, now: float) -> dict[str, int] | None:
        """The cached scores, asked for again once the poll interval has passed; None while the
        configuration limit answers (decide on failed launches alone). Other errors are raised."""
        if self.due(now):
            self.asked_at = now
            try:
                self.scores, self.limited = read_scores(client, self.request), False
            except Exception as error:
                if error_code(error) != LIMIT_CODE:
                    raise
                self.scores, self.limited = None, True
        return None if self.scores is None else dict(self.scores)
