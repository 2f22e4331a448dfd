"""Template Rules: what one parameter's constraint cannot say because it depends on another, checked
by CloudFormation before anything is created, as the job file's checks do at synth."""

from __future__ import annotations

from aws_cdk import CfnRule, CfnRuleAssertion, Fn, Stack

from stacks.console.construct_values import StackValues


def add_console_rules(stack: Stack, values: StackValues) -> None:
    """SSH needs a key pair (job file: access.key_pair); chosen subnets must lie in the chosen VPC."""
    CfnRule(stack, "SshNeedsKeyPair",
            rule_condition=Fn.condition_not(Fn.condition_equals(values.network.ssh_cidr, "")),
            assertions=[CfnRuleAssertion(
                assert_=Fn.condition_not(Fn.condition_equals(values.fleet.key_pair, "")),
                assert_description="SshCidr opens SSH: KeyPair must name a key pair")])
    given = values.network.given
    if given is None:
        return  # the stack makes its own network
    in_vpc = Fn.condition_each_member_equals(given.subnet_vpcs, given.vpc_id)
    CfnRule(stack, "SubnetsInVpc", assertions=[CfnRuleAssertion(
        assert_=in_vpc, assert_description="Subnets must all be subnets of the VPC chosen in VpcId")])
