"""Each region's spot price for the move rule's tie-break: the newest price per type and AZ, the lowest of them
as the region's, asked once an hour; a region whose price cannot be read has none, never 0."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from spot_trainer.capacity.regions.spot_prices import PRICE_POLL_SECONDS, PriceCache

TYPES = ("g5.xlarge", "g6.xlarge")


def point(instance_type: str, zone: str, hour: int, price: str) -> dict[str, Any]:
    return {"InstanceType": instance_type, "AvailabilityZone": zone, "SpotPrice": price,
            "Timestamp": datetime(2026, 12, 7, hour, tzinfo=UTC)}


class Region:
    """One region's EC2 price history, as boto3's paginator pages it; `error`: the AWS error it answers."""

    def __init__(self, *pages: list[dict[str, Any]], error: str = "") -> None:
        self.pages, self.error, self.asked = [{"SpotPriceHistory": p} for p in pages], error, 0

    def get_paginator(self, name: str) -> Region:
        assert name == "describe_spot_price_history"
        return self

    def paginate(self, **arguments: Any) -> list[dict[str, Any]]:
        self.asked += 1
        if self.error:
            raise ClientError({"Error": {"Code": self.error, "Message": "not authorized"}}, "DescribeSpotPriceHistory")
        return self.pages


def test_a_region_s_price_is_the_lowest_of_its_types_newest_prices() -> None:
    east = Region([point("g5.xlarge", "us-east-1a", 1, "0.40"), point("g5.xlarge", "us-east-1a", 3, "0.50")],
                  [point("g6.xlarge", "us-east-1b", 2, "0.45"), point("p5.48xlarge", "us-east-1b", 2, "0.01")])
    prices, unread = PriceCache(TYPES).current(lambda region: east, ["us-east-1"], 0.0)
    assert (prices, unread) == ({"us-east-1": 0.45}, [])  # g5's 0.40 was replaced at 3h; p5 is not the job's


def test_prices_are_asked_once_an_hour() -> None:
    west, cache = Region([point("g5.xlarge", "us-west-2a", 1, "0.30")]), PriceCache(TYPES)
    cache.current(lambda region: west, ["us-west-2"], 0.0)
    west.pages = [{"SpotPriceHistory": [point("g5.xlarge", "us-west-2a", 2, "0.60")]}]
    assert cache.current(lambda region: west, ["us-west-2"], PRICE_POLL_SECONDS - 1)[0] == {"us-west-2": 0.30}
    assert cache.current(lambda region: west, ["us-west-2"], PRICE_POLL_SECONDS)[0] == {"us-west-2": 0.60}
    assert west.asked == 2


def test_a_region_whose_price_cannot_be_read_has_none_and_one_line_says_why() -> None:
    regions = {"us-east-1": Region([point("g5.xlarge", "us-east-1a", 1, "0.40")]),
               "eu-west-1": Region(error="UnauthorizedOperation"),
               "us-west-2": Region([point("g5.xlarge", "us-west-2a", 1, "0")])}
    prices, unread = PriceCache(TYPES).current(regions.__getitem__, list(regions), 0.0)
    assert prices == {"us-east-1": 0.40}
    assert unread == [
        "spot price unknown in eu-west-1 (DescribeSpotPriceHistory failed: An error occurred "
        "(UnauthorizedOperation) when calling the DescribeSpotPriceHistory operation: not authorized): its ties go "
        "to the job file's order",
        "spot price unknown in us-west-2 (EC2 lists no spot price of g5.xlarge, g6.xlarge): its ties go to the job "
        "file's order"]
