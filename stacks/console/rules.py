"""Template Rules: what one parameter's constraint cannot say because it depends on another, checked
by CloudFormation before anything is created, as the job file's checks do at synth."""

from __future__ import annotations

from aws_cdk import CfnRule, CfnRuleAssertion, Fn, Stack, Token

from stacks.console.made_at_synth import SINGLE_SUBNET_TYPE
from stacks.console.parameters import JobParameters


def add_console_rules(stack: Stack, params: JobParameters) -> None:
    """SSH needs a key pair (job file: access.key_pair); chosen subnets must lie in the chosen VPC."""
    CfnRule(stack, "SshNeedsKeyPair",
            rule_condition=Fn.condition_not(Fn.condition_equals(params.value("SshCidr"), "")),
            assertions=[CfnRuleAssertion(
                assert_=Fn.condition_not(Fn.condition_equals(params.value("KeyPair"), "")),
                assert_description="SshCidr opens SSH: KeyPair must name a key pair")])
    vpc, subnets = params.offered("VpcId"), params.offered("Subnets")
    if vpc is None or subnets is None:
        return  # the stack makes its own network
    # A list parameter's ValueOf is a list; a single subnet's is one value, so take every parameter of its type.
    vpcs_of_subnets = (Fn.value_of_all(SINGLE_SUBNET_TYPE, "VpcId") if subnets.type == SINGLE_SUBNET_TYPE
                       else Token.as_list(Fn.value_of(subnets.logical_id, "VpcId")))
    in_vpc = Fn.condition_each_member_equals(vpcs_of_subnets, vpc.value_as_string)
    CfnRule(stack, "SubnetsInVpc", assertions=[CfnRuleAssertion(
        assert_=in_vpc, assert_description="Subnets must all be subnets of the VPC chosen in VpcId")])
