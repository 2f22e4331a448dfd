"""The [network] and [access] fields of a job file: the VPC and subnets instances run in, and who may
reach them over SSH, checked at synth."""

from __future__ import annotations

import dataclasses
import ipaddress
import re

from stacks.job.spec import AccessSpec, NetworkSpec, field_error

VPC_ID = re.compile(r"^vpc-([0-9a-f]{8}|[0-9a-f]{17})$")  # EC2's id forms, as CloudFormation checks them
SUBNET_ID = re.compile(r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")


def check_network(net: NetworkSpec) -> NetworkSpec:
    if net.subnets:
        bad = next((s for s in net.subnets if not SUBNET_ID.match(s)), None)
        if bad:
            raise field_error("network.subnets", 'expected subnet-… ids (8 or 17 hex digits), "create" or '
                              f'"parameter", got {bad!r}')
        if not net.vpc_id:
            raise field_error("network.vpc_id", "required (vpc-…) when network.subnets lists subnets")
        if len(set(net.subnets)) != len(net.subnets):
            raise field_error("network.subnets", "lists a subnet twice")
    if net.vpc_id and not VPC_ID.match(net.vpc_id):
        raise field_error("network.vpc_id", f"expected a VPC id like vpc-0123456789abcdef0, got {net.vpc_id!r}")
    if net.subnets:
        return dataclasses.replace(net, create=False)
    if net.vpc_id and net.create:
        raise field_error("network.vpc_id", 'only used with network.subnets (a list, or "parameter"); with the '
                    'default "create" the stack makes its own VPC')
    return net


def check_access(access: AccessSpec) -> None:
    if access.ssh_cidr and (problem := check_cidr(access.ssh_cidr)):
        raise field_error("access.ssh_cidr", problem)
    if ":" in access.ssh_cidr:
        raise field_error("access.ssh_cidr", f"{access.ssh_cidr!r} is IPv6; the SSH rule takes an IPv4 range like "
                    "203.0.113.0/24 (or use Session Manager)")
    if access.ssh_cidr in ("0.0.0.0/0", "::/0"):
        raise field_error("access.ssh_cidr", "refusing SSH from the whole internet; give your own range")
    if access.ssh_cidr and not access.key_pair:
        raise field_error("access.key_pair", "required when access.ssh_cidr opens SSH")


def check_cidr(value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return f"{value!r} is not a CIDR block like 203.0.113.0/24"
    return None
