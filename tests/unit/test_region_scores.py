"""The placement-score cache: one configuration per job, asked at most every poll interval, and no
scores (decide on failed launches alone) while AWS answers MaxConfigLimitExceeded."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from spot_trainer.capacity.regions.placement_scores import ScoreCache, ScoreRequest


class Paginator:
    def __init__(self, client: Client) -> None:
        self.client = client

    def paginate(self, **arguments: Any) -> list[dict[str, Any]]:
        self.client.asked.append(arguments)
        if self.client.error:
            raise ClientError({"Error": {"Code": self.client.error, "Message": "no"}}, "GetSpotPlacementScores")
        return self.client.pages


class Client:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages, self.asked, self.error = pages, [], ""  # type: ignore[var-annotated]

    def get_paginator(self, name: str) -> Paginator:
        assert name == "get_spot_placement_scores"
        return Paginator(self)


PAGES = [{"SpotPlacementScores": [{"Region": "us-west-2", "Score": 9}, {"Region": "us-east-1", "Score": 3}]},
         {"SpotPlacementScores": [{"Region": "eu-west-1", "Score": 7}]}]
REQUEST = ScoreRequest.for_job(["g5.xlarge", "g6.xlarge", "g4dn.xlarge"], 2, ["us-west-2", "us-east-1", "eu-west-1"])


def test_the_job_asks_one_stable_configuration_whatever_the_order_of_its_lists() -> None:
    other = ScoreRequest.for_job(["g4dn.xlarge", "g6.xlarge", "g5.xlarge"], 2, ["eu-west-1", "us-east-1", "us-west-2"])
    assert other == REQUEST
    assert REQUEST.arguments() == {
        "InstanceTypes": ["g4dn.xlarge", "g5.xlarge", "g6.xlarge"], "TargetCapacity": 2,
        "TargetCapacityUnitType": "units", "SingleAvailabilityZone": False,
        "RegionNames": ["eu-west-1", "us-east-1", "us-west-2"]}


def test_every_page_is_read_and_the_answer_cached_for_the_poll_interval() -> None:
    client, cache = Client(PAGES), ScoreCache(REQUEST, poll_seconds=600)
    assert cache.current(client, 0.0) == {"us-west-2": 9, "us-east-1": 3, "eu-west-1": 7}
    client.pages = [{"SpotPlacementScores": [{"Region": "us-west-2", "Score": 2}]}]
    assert cache.current(client, 599.0) == {"us-west-2": 9, "us-east-1": 3, "eu-west-1": 7}
    assert len(client.asked) == 1
    assert cache.current(client, 600.0) == {"us-west-2": 2}
    assert len(client.asked) == 2


def test_the_configuration_limit_leaves_no_scores_and_is_asked_again_next_poll() -> None:
    client, cache = Client(PAGES), ScoreCache(REQUEST)
    cache.current(client, 0.0)
    client.error = "MaxConfigLimitExceeded"
    assert cache.current(client, 600.0) is None
    assert cache.limited
    client.error = ""
    assert cache.current(client, 1200.0) == {"us-west-2": 9, "us-east-1": 3, "eu-west-1": 7}
    assert not cache.limited


def test_another_error_is_raised_not_taken_for_the_limit() -> None:
    client = Client(PAGES)
    client.error = "UnauthorizedOperation"
    with pytest.raises(ClientError, match="UnauthorizedOperation"):
        ScoreCache(REQUEST).current(client, 0.0)


@pytest.mark.parametrize("types, nodes, regions, problem", [
    ([], 1, ["us-east-1"], "at least one instance type"),
    (["g5.xlarge"], 0, ["us-east-1"], "the node count, at least 1, not 0"),
    (["g5.xlarge"], 1, [f"r-{i}" for i in range(11)], "1 to 10 regions, not 11"),
])
def test_a_request_aws_would_refuse_is_named(types: list[str], nodes: int, regions: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ScoreRequest.for_job(types, nodes, regions)


def test_the_poll_interval_stays_within_10_to_15_minutes() -> None:
    with pytest.raises(ValueError, match="every 600 to 900 s, not 60"):
        ScoreCache(REQUEST, poll_seconds=60)


def test_the_regions_package_imports_only_the_standard_library() -> None:
    import ast
    import sys
    from pathlib import Path

    import spot_trainer.capacity.regions as package
    for path in Path(package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module and node.module.split(".")[0] in sys.stdlib_module_names, (path.name, node.module)
            elif isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in sys.stdlib_module_names for a in node.names), path.name
