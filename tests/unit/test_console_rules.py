"""Checks that span two parameters live in the template's Rules; each case is judged by evaluating the
synthesized Rules as CloudFormation does (a rule applies when its RuleCondition holds; then every
Assert must hold), with the subnets' VPCs as the console would look them up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stacks.job_file import load_job
from tests.unit.stack_support import Synthesized, synth


def evaluate(node: Any, values: dict[str, str], vpc_of: dict[str, str], types: dict[str, str]) -> Any:
    """The rule functions our Rules use: Ref, Fn::Not, Fn::Equals, Fn::EachMemberEquals, Fn::ValueOf and
    Fn::ValueOfAll (here as lists: one value per subnet)."""
    if not isinstance(node, dict):
        return node
    (function, argument), = node.items()
    if function == "Ref":
        return values[argument]
    if function == "Fn::Not":
        return not evaluate(argument[0], values, vpc_of, types)
    if function == "Fn::Equals":
        return evaluate(argument[0], values, vpc_of, types) == evaluate(argument[1], values, vpc_of, types)
    if function == "Fn::EachMemberEquals":
        value = evaluate(argument[1], values, vpc_of, types)
        return all(member == value for member in evaluate(argument[0], values, vpc_of, types))
    if function == "Fn::ValueOfAll":
        kind, attribute = argument
        return [member for name, of_kind in types.items() if of_kind == kind
                for member in evaluate({"Fn::ValueOf": [name, attribute]}, values, vpc_of, types)]
    if function == "Fn::ValueOf":
        name, attribute = argument
        assert attribute == "VpcId"
        if types[name].startswith("List<"):
            return [vpc_of[member] for member in values[name].split(",")]
        return [vpc_of[values[name]]]
    raise AssertionError(f"unexpected rule function {function}")


def refusals(template: dict[str, Any], values: dict[str, str], vpc_of: dict[str, str]) -> list[str]:
    """The AssertDescription of every rule the values break (what the console shows)."""
    typed = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()} | values
    types = {name: p["Type"] for name, p in template["Parameters"].items()}
    found = []
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not evaluate(rule["RuleCondition"], typed, vpc_of, types):
            continue
        found += [a["AssertDescription"] for a in rule["Assertions"] if not evaluate(a["Assert"], typed, vpc_of, types)]
    return found


@pytest.fixture(scope="module")
def templates(synthesized: dict[str, Synthesized]) -> dict[str, dict[str, Any]]:
    return {job: synthesized[job].raw for job in ("example", "cifar")}


@pytest.mark.parametrize(("ssh", "key", "refused"), [
    ("", "", False), ("203.0.113.0/24", "my-key", False), ("203.0.113.0/24", "", True), ("", "my-key", False)])
@pytest.mark.parametrize("job", ["example", "cifar"])
def test_ssh_needs_a_key_pair_like_the_job_file(templates: dict[str, dict[str, Any]], job: str, ssh: str,
                                                key: str, refused: bool) -> None:
    found = refusals(templates[job], {"SshCidr": ssh, "KeyPair": key, "VpcId": "vpc-1", "Subnets": "subnet-a"},
                     {"subnet-a": "vpc-1"})
    assert found == (["SshCidr opens SSH: KeyPair must name a key pair"] if refused else [])


@pytest.mark.parametrize(("subnets", "refused"), [
    ("subnet-a,subnet-b", False), ("subnet-a", False), ("subnet-a,subnet-c", True), ("subnet-c", True)])
def test_subnets_must_lie_in_the_chosen_vpc(templates: dict[str, dict[str, Any]], subnets: str,
                                            refused: bool) -> None:
    vpc_of = {"subnet-a": "vpc-1", "subnet-b": "vpc-1", "subnet-c": "vpc-2"}
    found = refusals(templates["example"], {"VpcId": "vpc-1", "Subnets": subnets}, vpc_of)
    assert found == (["Subnets must all be subnets of the VPC chosen in VpcId"] if refused else [])


def test_a_single_subnet_template_checks_its_one_subnet(tmp_path: Path) -> None:
    job = tmp_path / "cluster.toml"
    example = (load_job("example").source).read_text()
    job.write_text(example.replace("[capacity]", "[capacity]\ndistributed = true\nplacement = \"cluster\"", 1)
                   .replace("nodes = 1", "nodes = 2"))
    template = synth(str(job), tmp_path / "out").raw
    assert template["Parameters"]["Subnets"]["Type"] == "AWS::EC2::Subnet::Id"
    vpc_of = {"subnet-a": "vpc-1", "subnet-c": "vpc-2"}
    assert refusals(template, {"VpcId": "vpc-1", "Subnets": "subnet-a"}, vpc_of) == []
    assert refusals(template, {"VpcId": "vpc-1", "Subnets": "subnet-c"}, vpc_of) == [
        "Subnets must all be subnets of the VPC chosen in VpcId"]


def test_a_created_network_has_no_subnet_rule(templates: dict[str, dict[str, Any]]) -> None:
    assert set(templates["cifar"]["Rules"]) == {"SshNeedsKeyPair"}
