"""The link the local spot cloud plays between regions: which region a bucket is in (the end of its name), each
pair's round trip (none within a region, the same both ways), and a flag that cannot be played refused in one line."""

from __future__ import annotations

import pytest

from localcloud.region_link import UNKNOWN_PAIR_MS, CrossRegionLink, LinkError, bucket_region


@pytest.mark.parametrize(("bucket", "region"), [
    ("regions-123456789012-eu-west-1", "eu-west-1"),  # a job's bucket in a region
    ("cdk-hnb659fds-assets-123456789012-us-west-2", "us-west-2"),  # the CDK's assets there
    ("logs-123456789012-us-gov-west-1", "us-gov-west-1"),
    ("spottrainer-mine-checkpointbucket-abc123", None),  # a job of one region's: no region in its name
    ("", None),
])
def test_a_buckets_region_is_the_end_of_its_name(bucket: str, region: str | None) -> None:
    assert bucket_region(bucket) == region


def test_a_round_trip_is_the_pairs_either_way_and_nothing_within_a_region() -> None:
    link = CrossRegionLink()
    there_and_back = link.round_trip_seconds("us-east-1", "eu-west-1")
    assert there_and_back == link.round_trip_seconds("eu-west-1", "us-east-1") > 0
    assert link.round_trip_seconds("us-west-2", "eu-west-1") > there_and_back  # farther apart
    assert link.round_trip_seconds("eu-west-1", "eu-west-1") == 0
    assert link.round_trip_seconds("us-east-1", "ap-south-2") == UNKNOWN_PAIR_MS / 1000
    assert CrossRegionLink(latency_ms=40).round_trip_seconds("us-west-2", "eu-west-1") == 0.04


@pytest.mark.parametrize(("latency", "mbps", "flag"), [(None, 0.0, "--cross-region-mbps 0:"),
                                                       (-5.0, 10.0, "--cross-region-latency-ms -5:")])
def test_a_link_that_cannot_be_played_is_one_line_naming_its_flag(latency: float | None, mbps: float,
                                                                   flag: str) -> None:
    with pytest.raises(LinkError) as refused:
        CrossRegionLink(latency, mbps)
    assert str(refused.value).startswith(flag) and "\n" not in str(refused.value)
