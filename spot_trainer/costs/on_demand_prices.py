"""On-demand prices, USD per hour: Linux, US East (N. Virginia), shared tenancy.

A maintained table rather than the Pricing API: the instance role and a user's laptop can always read
it, and the API is only in a few regions. Update it with the page below; prices change rarely.
A type missing here has an unknown price (None): the cost figures then name it and leave it out,
rather than guessing from a neighbour.
"""

from __future__ import annotations

SOURCE = "https://aws.amazon.com/ec2/pricing/on-demand/ (Linux, US East (N. Virginia))"
AS_OF = "2026-11-22"

USD_PER_HOUR: dict[str, float] = {
    # GPU: the types jobs list
    "g4dn.xlarge": 0.526,
    "g4dn.2xlarge": 0.752,
    "g4dn.4xlarge": 1.204,
    "g4dn.8xlarge": 2.176,
    "g4dn.12xlarge": 3.912,
    "g4dn.16xlarge": 4.352,
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.4xlarge": 1.624,
    "g5.8xlarge": 2.448,
    "g5.12xlarge": 5.672,
    "g5.16xlarge": 4.096,
    "g5.24xlarge": 8.144,
    "g5.48xlarge": 16.288,
    "g6.xlarge": 0.8048,
    "g6.2xlarge": 0.9776,
    "g6.4xlarge": 1.3232,
    "g6.8xlarge": 2.0144,
    "g6e.xlarge": 1.861,
    "p3.2xlarge": 3.06,
    "p4d.24xlarge": 32.7726,
    "p5.48xlarge": 98.32,
    # CPU: the local cloud's default type and small test jobs
    "c5.large": 0.085,
    "c5.xlarge": 0.17,
    "c6i.large": 0.085,
    "c6i.xlarge": 0.17,
    "c7i.large": 0.08925,
    "c7i.xlarge": 0.1785,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m6i.large": 0.096,
    "m6i.xlarge": 0.192,
    "m7i.large": 0.1008,
    "m7i.xlarge": 0.2016,
    "t3.micro": 0.0104,
    "t3.small": 0.0208,
    "t3.medium": 0.0416,
    "t3.large": 0.0832,
}


def on_demand_price(instance_type: str) -> float | None:
    """USD per hour on demand, or None when the table does not know the type."""
    return USD_PER_HOUR.get(instance_type)
