"""Where instances run: a created VPC (public subnets, no NAT, free S3 endpoint) or given subnets,
and a security group that opens nothing unless SSH is asked for."""

from __future__ import annotations

from aws_cdk import CfnCondition, Fn, Tags
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from stacks.console.construct_values import NetworkValues


class JobNetwork(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, values: NetworkValues, one_az: bool,
                 max_azs: int = 3) -> None:
        """`one_az`: the group launches in a single subnet, as a cluster placement group requires."""
        super().__init__(scope, construct_id)
        if values.given is None:
            self.vpc_id, created = self._create_vpc(max_azs)
            self.subnet_ids = created[:1] if one_az else created
        else:
            self.vpc_id, self.subnet_ids = values.given.vpc_id, values.given.subnet_ids
        self.security_group = ec2.CfnSecurityGroup(
            self,
            "SecurityGroup",
            group_description="Spot Trainer instances: no inbound traffic unless SSH is enabled",
            vpc_id=self.vpc_id,
            security_group_egress=[
                # Instances reach S3, CloudWatch, PyPI and the spot metadata service.
                ec2.CfnSecurityGroup.EgressProperty(ip_protocol="-1", cidr_ip="0.0.0.0/0",
                                                    description="All outbound")
            ],
        )
        has_ssh = CfnCondition(self, "SshEnabled", expression=Fn.condition_not(
            Fn.condition_equals(values.ssh_cidr, "")))
        ingress = ec2.CfnSecurityGroupIngress(
            self, "SshIngress", group_id=self.security_group.attr_group_id, ip_protocol="tcp",
            from_port=22, to_port=22, cidr_ip=values.ssh_cidr, description="SSH",
        )
        ingress.cfn_options.condition = has_ssh
        self._open_to_peers(values.distributed)

    def _open_to_peers(self, distributed_training: str) -> None:
        """Distributed nodes reach each other on any TCP port (rendezvous store, gloo, NCCL pick theirs at
        run time); only members of this same group, so nothing else gets in."""
        distributed = CfnCondition(self, "DistributedTraining", expression=Fn.condition_equals(
            distributed_training, "true"))
        peers = ec2.CfnSecurityGroupIngress(
            self, "PeerIngress", group_id=self.security_group.attr_group_id, ip_protocol="tcp",
            from_port=0, to_port=65535, source_security_group_id=self.security_group.attr_group_id,
            description="Distributed training between this job's own nodes",
        )
        peers.cfn_options.condition = distributed

    def _create_vpc(self, max_azs: int) -> tuple[str, list[str]]:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=max_azs,
            nat_gateways=0,  # public subnets only: a NAT gateway would cost more than small spot jobs
            subnet_configuration=[ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)],
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
            restrict_default_security_group=False,  # avoids a custom-resource Lambda (needs bootstrap)
        )
        for tag in ("aws-cdk:subnet-name", "aws-cdk:subnet-type"):  # for Vpc.from_lookup, unused: template bytes
            Tags.of(vpc).remove(tag)
        return vpc.vpc_id, [s.subnet_id for s in vpc.public_subnets]
