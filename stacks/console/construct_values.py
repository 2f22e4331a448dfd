"""What the console's parameters give the stack's constructs, as typed values: each a deploy-time token of the
parameter that carries it, so a construct names what it takes and never a parameter."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Token

from stacks.console.made_at_synth import SINGLE_SUBNET_TYPE
from stacks.console.parameters import JobParameters


@dataclass(frozen=True)
class FleetValues:
    """The spot fleet's launch template and group."""

    image_id: str
    instance_types: str  # comma-separated, as many as the job file lists
    nodes: str
    volume_gib: float  # the root volume's size
    key_pair: str  # "": no key pair
    spot_max_price: str  # "": the on-demand price caps it

    @classmethod
    def of(cls, params: JobParameters) -> FleetValues:
        return cls(image_id=params.value("ImageId"), instance_types=params.value("InstanceTypes"),
                   nodes=params.value("Nodes"), volume_gib=Token.as_number(params.value("VolumeSize")),
                   key_pair=params.value("KeyPair"), spot_max_price=params.value("SpotMaxPrice"))


@dataclass(frozen=True)
class GivenNetwork:
    """A VPC and subnets the job file names, for the console to change."""

    vpc_id: str
    subnet_ids: list[str]


@dataclass(frozen=True)
class NetworkValues:
    """Where instances run and who may reach them."""

    given: GivenNetwork | None  # None: the stack creates a VPC
    ssh_cidr: str  # "": no SSH
    distributed: str  # "true": the nodes reach each other

    @classmethod
    def of(cls, params: JobParameters) -> NetworkValues:
        return cls(given=given_network(params), ssh_cidr=params.value("SshCidr"),
                   distributed=params.value("Distributed"))


def given_network(params: JobParameters) -> GivenNetwork | None:
    """The job's own VPC and subnets (one subnet for a cluster placement group), or None where the stack makes one."""
    vpc, subnets = params.offered("VpcId"), params.offered("Subnets")
    if subnets is None or vpc is None:
        return None
    if subnets.type == SINGLE_SUBNET_TYPE:
        return GivenNetwork(vpc.value_as_string, [subnets.value_as_string])
    return GivenNetwork(vpc.value_as_string, subnets.value_as_list)
