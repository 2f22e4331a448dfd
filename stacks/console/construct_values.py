"""What the console's parameters give the stack's constructs, as typed values: each a deploy-time token of the
parameter that carries it, so a construct names what it takes and never a parameter. `StackValues.of` is the one
place a parameter is read by its name."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Fn, Token

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


@dataclass(frozen=True)
class GivenNetwork:
    """A VPC and subnets the job file names, for the console to change."""

    vpc_id: str
    subnet_ids: list[str]
    # The VPC of each chosen subnet: Fn::ValueOf, which CloudFormation takes in a template's Rules only.
    subnet_vpcs: list[str]


@dataclass(frozen=True)
class NetworkValues:
    """Where instances run and who may reach them."""

    given: GivenNetwork | None  # None: the stack creates a VPC
    ssh_cidr: str  # "": no SSH
    distributed: str  # "true": the nodes reach each other


@dataclass(frozen=True)
class StorageValues:
    """The checkpoint bucket and the log group."""

    existing_bucket: str  # "": the stack creates one
    noncurrent_days: float  # how long an overwritten checkpoint's old versions stay
    log_retention_days: float


@dataclass(frozen=True)
class AlertValues:
    """Who hears of the job, and when a quiet job is stalled."""

    notify_email: str  # "": no subscription
    stall_minutes: str  # "0": no stall alarm


@dataclass(frozen=True)
class DataValues:
    """The dataset the instances may read."""

    bucket: str  # "": none
    prefix: str


@dataclass(frozen=True)
class WatchValues:
    """When the capacity watch or the regions controller gives up on spot."""

    max_spot_wait: str  # "": never for want of spot
    deadline: str  # "": no deadline
    deadline_margin: str


@dataclass(frozen=True)
class StackValues:
    """Every parameter the stack's constructs take."""

    fleet: FleetValues
    network: NetworkValues
    storage: StorageValues
    alerts: AlertValues
    data: DataValues
    watch: WatchValues
    trainer_package: str  # "": the wheel shipped with the stack

    @classmethod
    def of(cls, params: JobParameters) -> StackValues:
        value = params.value
        return cls(
            fleet=FleetValues(image_id=value("ImageId"), instance_types=value("InstanceTypes"), nodes=value("Nodes"),
                              volume_gib=Token.as_number(value("VolumeSize")), key_pair=value("KeyPair"),
                              spot_max_price=value("SpotMaxPrice")),
            network=NetworkValues(given=given_network(params), ssh_cidr=value("SshCidr"),
                                  distributed=value("Distributed")),
            storage=StorageValues(existing_bucket=value("ExistingBucket"),
                                  noncurrent_days=Token.as_number(value("CheckpointVersionRetentionDays")),
                                  log_retention_days=Token.as_number(value("LogRetentionDays"))),
            alerts=AlertValues(notify_email=value("NotifyEmail"), stall_minutes=value("StallAlarmMinutes")),
            data=DataValues(bucket=value("DataBucket"), prefix=value("DataPrefix")),
            watch=WatchValues(max_spot_wait=value("MaxSpotWait"), deadline=value("Deadline"),
                              deadline_margin=value("DeadlineMargin")),
            trainer_package=value("TrainerPackage"),
        )


def given_network(params: JobParameters) -> GivenNetwork | None:
    """The job's own VPC and subnets (one subnet for a cluster placement group), or None where the stack makes one."""
    vpc, subnets = params.offered("VpcId"), params.offered("Subnets")
    if subnets is None or vpc is None:
        return None
    # A list parameter's ValueOf is a list; a single subnet's is one value, so take every parameter of its type.
    if subnets.type == SINGLE_SUBNET_TYPE:
        return GivenNetwork(vpc.value_as_string, [subnets.value_as_string],
                            Fn.value_of_all(SINGLE_SUBNET_TYPE, "VpcId"))
    return GivenNetwork(vpc.value_as_string, subnets.value_as_list,
                        Token.as_list(Fn.value_of(subnets.logical_id, "VpcId")))
