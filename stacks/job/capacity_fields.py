"""The [capacity] fields of a job file: instance types, nodes, price, image and root volume, and what a
distributed job's placement asks of its network, checked at synth."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection

from spot_trainer import setting_patterns as pattern
from spot_trainer.settings import MAX_NODES
from stacks.job.instance_types import check_image_architecture, check_instance_types
from stacks.job.spec import (
    AMI_ID,
    PLACEMENTS,
    SSM_PATH,
    CapacitySpec,
    NetworkSpec,
    field_error,
    out_of_bounds,
    plain_decimal,
)

MAX_PRICE_USD = 1000.0  # per instance-hour: far above any on-demand price, so a typo is caught
ROOT_DEVICE = re.compile(r"^/dev/[a-z0-9]+$")


def fixed_point(price: float) -> str:
    """1e-05 → '0.00001': the SpotMaxPrice parameter (and EC2) take plain decimals only."""
    if not 0 < price <= MAX_PRICE_USD:  # out of range (or nan): refused below, in the user's own spelling
        return str(price)
    return plain_decimal(price)


def check_capacity(cap: CapacitySpec) -> None:
    if problem := check_instance_types(list(cap.instance_types)):
        raise field_error("capacity.instance_types", problem)
    if not 1 <= cap.nodes <= MAX_NODES:
        raise field_error("capacity.nodes", f"expected 1 to {MAX_NODES}, got {cap.nodes}")
    if cap.max_price:
        try:
            price = float(cap.max_price)
        except ValueError:
            raise field_error("capacity.max_price", f"expected USD per hour like 0.45, got {cap.max_price!r}") from None
        if not price > 0:
            raise field_error("capacity.max_price", f"expected a positive price, got {cap.max_price!r}")
        if not price < MAX_PRICE_USD:  # also catches inf and nan
            raise field_error("capacity.max_price", f"{cap.max_price!r} USD/hour is beyond any instance's price "
                        f"(below {MAX_PRICE_USD:g}); leave it out for the on-demand cap")
        # "0.45 ", "1_000", "0001": float() reads them, the SpotMaxPrice parameter's own pattern does not
        if not re.fullmatch(pattern.PRICE, cap.max_price):
            raise field_error("capacity.max_price", f"expected a plain decimal like 0.45, got {cap.max_price!r}")
    if not ROOT_DEVICE.match(cap.root_device):
        raise field_error("capacity.root_device",
                    f"expected a device name like /dev/sda1 or /dev/xvda, got {cap.root_device!r}")
    if not (SSM_PATH.match(cap.ami) or AMI_ID.match(cap.ami)):
        raise field_error("capacity.ami", f"expected an SSM parameter path or ami-… id, got {cap.ami!r}")
    if problem := check_image_architecture(cap.ami, cap.instance_types):
        raise field_error("capacity.ami", problem)
    if (problem := out_of_bounds("capacity.volume_size", cap.volume_size)) is not None:
        raise field_error("capacity.volume_size", f"expected {problem} GiB, got {cap.volume_size}")


def check_distributed(cap: CapacitySpec, given: Collection[str]) -> CapacitySpec:
    """Multi-node fields; returns the spec with min_nodes filled in (default: every node)."""
    if cap.distributed and cap.nodes < 2:
        raise field_error("capacity.distributed",
                          f"a distributed job needs at least 2 nodes, capacity.nodes is {cap.nodes}")
    if "min_nodes" in given and not cap.distributed:
        raise field_error("capacity.min_nodes", "only applies when capacity.distributed = true (otherwise one node "
                    "trains and the others stand by)")
    if "min_nodes" in given and not 1 <= cap.min_nodes <= cap.nodes:
        raise field_error("capacity.min_nodes", f"expected 1 to capacity.nodes ({cap.nodes}), got {cap.min_nodes}")
    if cap.placement not in PLACEMENTS:
        raise field_error("capacity.placement", f'expected "cluster" or "", got {cap.placement!r}')
    if cap.placement and not cap.distributed:
        raise field_error("capacity.placement", "only applies when capacity.distributed = true: a standby gains "
                    "nothing from sitting next to the node that trains")
    return dataclasses.replace(cap, min_nodes=cap.min_nodes if "min_nodes" in given else cap.nodes)


def check_cluster_network(cap: CapacitySpec, net: NetworkSpec) -> None:
    """A cluster placement group lives in one AZ; listed subnets' AZs are unknown at synth, so one subnet."""
    if cap.placement == "cluster" and len(net.subnets) > 1:
        raise field_error("capacity.placement", f'"cluster" keeps every node in one AZ: network.subnets must list '
                    f"exactly one subnet, got {len(net.subnets)}")
