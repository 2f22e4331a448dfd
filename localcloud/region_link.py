"""The network between a job's regions as the local spot cloud plays it: a round trip's latency per pair of
regions, and the bandwidth of each instance's traffic to other regions. The region proxies
(localcloud/region_proxy.py) apply it to every request an instance sends to another region.

AWS publishes no fixed latency between Regions: Network Manager's Infrastructure Performance shows its own
probes' live p50 round trip per pair of Regions
(https://docs.aws.amazon.com/network-manager/latest/infrastructure-performance/how-nmip-works.html). The
defaults below are approximate public figures instead: the average round trips measured between EC2 instances
in "Latency Between AWS Global Regions" (2017), as tabulated in
https://acomputerscientistlearnsaws.blogspot.com/2017/04/aws-regions.html. The bandwidth's default is a bound,
not a measured S3 throughput: traffic to other Regions of an instance with fewer than 32 vCPUs is limited to
5 Gbps, and one flow outside a cluster placement group to 5 Gbps
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth.html).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

# Average round trip in ms between EC2 instances of two regions (approximate public figures, see above).
ROUND_TRIP_MS = {
    frozenset({"us-east-1", "us-west-2"}): 87.0,
    frozenset({"us-east-1", "eu-west-1"}): 80.5,
    frozenset({"us-west-2", "eu-west-1"}): 137.0,
    frozenset({"us-east-1", "us-west-1"}): 72.7,
    frozenset({"us-east-1", "eu-central-1"}): 88.7,
    frozenset({"eu-west-1", "eu-central-1"}): 19.6,
    frozenset({"us-west-1", "us-west-2"}): 19.5,
}
UNKNOWN_PAIR_MS = 100.0  # a pair the table lacks: a transatlantic-scale guess, not a measurement
INSTANCE_CROSS_REGION_MBPS = 5000.0  # EC2's bound for an instance under 32 vCPUs (see above)
# A bucket's region is the end of its name: the job's are <job>-<account>-<region>, CDK's assets
# cdk-<qualifier>-assets-<account>-<region>.
_REGION_AT_END = re.compile(r"(?:^|-)([a-z]{2}(?:-gov)?-[a-z]+-[0-9])$")


def bucket_region(bucket: str) -> str | None:
    """The region a bucket's name ends with, or None for a name that names none."""
    found = _REGION_AT_END.search(bucket)
    return found.group(1) if found else None


class LinkError(ValueError):
    """A latency or bandwidth that cannot be played; the message names the flag."""


@dataclass
class CrossRegionLink:
    """What crossing regions costs. Changed in place, it applies to the next request of every proxy."""

    latency_ms: float | None = None  # one round trip for every pair; None: each pair's from ROUND_TRIP_MS
    mbps: float = INSTANCE_CROSS_REGION_MBPS  # megabits per second of each instance's traffic to other regions

    def __post_init__(self) -> None:
        if self.latency_ms is not None and not 0 <= self.latency_ms <= 60_000:
            raise LinkError(f"--cross-region-latency-ms {self.latency_ms:g}: expected 0 to 60000 milliseconds")
        if not 0 < self.mbps <= 1_000_000:
            raise LinkError(f"--cross-region-mbps {self.mbps:g}: expected a positive number of megabits per second")

    def round_trip_seconds(self, here: str, there: str) -> float:
        if here == there:
            return 0.0
        ms = self.latency_ms if self.latency_ms is not None else ROUND_TRIP_MS.get(frozenset({here, there}),
                                                                                 UNKNOWN_PAIR_MS)
        return ms / 1000.0

    @property
    def bytes_per_second(self) -> float:
        return self.mbps * 1e6 / 8


@dataclass
class LinkPacer:
    """One link's bandwidth: bytes that cross it wait their turn, whichever request they belong to."""

    link: CrossRegionLink
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _free_at: float = 0.0  # when the link has sent everything queued so far

    def pass_bytes(self, count: int) -> None:
        """Return once `count` more bytes have crossed at the link's bandwidth."""
        with self._lock:
            start = max(time.monotonic(), self._free_at)
            self._free_at = start + count / self.link.bytes_per_second
            done = self._free_at
        if (wait := done - time.monotonic()) > 0:
            time.sleep(wait)
