"""moto's server with the lifecycle-hook parts of Auto Scaling that moto lacks and the stack uses,
CloudFormation's rule for SSM-typed parameters (only the value in use is resolved), and the deletion
of a stack's route tables.

moto creates a group from a template without its LifecycleHookSpecificationList and has no
CompleteLifecycleAction. Here the hooks are created as AWS creates them, and completing an action
checks what AWS checks (the hook exists on that group, the instance was in it), so a wrong hook
name in the stack or the agent fails locally as it would in AWS. moto also resolves an SSM-typed
parameter's default when a value is passed for it, so a default naming a public parameter moto
lacks (the Deep Learning AMI's) fails the deploy even though the value passed exists. And moto
leaves a template's route tables behind on stack deletion, so a job's own VPC cannot be deleted.
Its Fn::Base64 fails on a Ref to a Number parameter (its Ref yields an int; AWS's yields the text).
Its UpdateAutoScalingGroup replaces the whole mixed instances policy (and fails without its launch
template); AWS changes only the properties a request names, which is how a job switches market.
Its log group's Fn::GetAtt Arn lacks the trailing `:*` AWS returns
(https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-logs-loggroup.html),
which IAM policies naming the group rely on.
EC2's spot vCPU quotas, which moto's Service Quotas lacks, are in localcloud/moto_quotas.py; the Spot
placement score and a group's failed launches, played from a per-region capacity plan, in
localcloud/moto_regions.py; IAM as AWS
enforces it for callers holding a role (moto checks none) in localcloud/moto_iam.py.
Run: python -m localcloud.moto_app with moto_server's arguments.
"""

from __future__ import annotations

import base64
from typing import Any

from moto import server
from moto.autoscaling.exceptions import ValidationError
from moto.autoscaling.models import FakeAutoScalingGroup, autoscaling_backends
from moto.autoscaling.responses import AutoScalingResponse
from moto.cloudformation import parsing
from moto.cloudformation.parsing import ResourceMap
from moto.core.responses import EmptyResult
from moto.ec2.exceptions import InvalidSubnetIdError
from moto.ec2.models import ec2_backends
from moto.ec2.models.route_tables import RouteTable
from moto.logs.models import LogGroup

from localcloud import moto_iam, moto_launches, moto_quotas, moto_regions

_create_group = FakeAutoScalingGroup.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]


def _create_group_with_hooks(cls: type, resource_name: str, cloudformation_json: dict[str, Any],
                             account_id: str, region_name: str, **kwargs: Any) -> FakeAutoScalingGroup:
    group = _create_group(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
    backend = autoscaling_backends[account_id][region_name]
    for spec in cloudformation_json["Properties"].get("LifecycleHookSpecificationList", []):
        backend.create_lifecycle_hook(
            name=spec["LifecycleHookName"], as_name=group.name, transition=spec["LifecycleTransition"],
            timeout=int(spec["HeartbeatTimeout"]) if "HeartbeatTimeout" in spec else None,
            result=spec.get("DefaultResult"),
        )
    return group


def complete_lifecycle_action(self: AutoScalingResponse) -> EmptyResult:
    group_name = self._get_param("AutoScalingGroupName")
    hook_name = self._get_param("LifecycleHookName")
    instance_id = self._get_param("InstanceId")
    if not self.autoscaling_backend.describe_lifecycle_hooks(group_name, [hook_name]):
        raise ValidationError(f"No Lifecycle Hook found with name {hook_name} for group {group_name}")
    if not instance_id or not instance_id.startswith("i-"):
        raise ValidationError(f"No active Lifecycle Action found with instance ID {instance_id}")
    return EmptyResult()


_load_parameters = ResourceMap.load_parameters


def _load_parameters_in_use(self: ResourceMap) -> None:
    """Resolve an SSM-typed parameter's default only when no value is passed for it, as AWS does."""
    slots = self._template.get("Parameters", {})
    overridden = {name: slots[name].pop("Default") for name in self.input_parameters
                  if name in slots and "Default" in slots[name]
                  and str(slots[name].get("Type", "")).startswith("AWS::SSM::Parameter::")}
    try:
        _load_parameters(self)
    finally:
        for name, default in overridden.items():
            slots[name]["Default"] = default


def _delete_route_table(cls: type, resource_name: str, cloudformation_json: dict[str, Any], account_id: str,
                        region_name: str) -> None:
    """As AWS: the table goes with the stack once its subnets (and so their associations) are gone."""
    backend = ec2_backends[account_id][region_name]
    table = backend.get_route_table(resource_name)
    for association, subnet in list(table._associations.items()):
        try:
            backend.get_subnet(subnet)
        except InvalidSubnetIdError:
            del table._associations[association]
    backend.delete_route_table(resource_name)


_clean_json = parsing.clean_json


def _clean_json_base64_of_text(resource_json: Any, resources_map: Any) -> Any:
    """Fn::Base64 encodes the text of its value, as AWS does for a Number parameter's Ref."""
    if isinstance(resource_json, dict) and set(resource_json) == {"Fn::Base64"}:
        value = parsing.clean_json(resource_json["Fn::Base64"], resources_map)
        return base64.b64encode(str(value).encode("utf-8")).decode("utf-8")
    return _clean_json(resource_json, resources_map)


_update_group = FakeAutoScalingGroup.update


def _update_group_named_properties(self: FakeAutoScalingGroup, *args: Any, **kwargs: Any) -> None:
    """Merge a partial MixedInstancesPolicy into the group's own, as AWS does."""
    policy = kwargs.get("mixed_instances_policy")
    current = self.mixed_instances_policy or {}
    if current:
        merged = {**current, **(policy or {})}
        merged["InstancesDistribution"] = {**current.get("InstancesDistribution", {}),
                                           **(policy or {}).get("InstancesDistribution", {})}
        spec = {**merged["LaunchTemplate"]["LaunchTemplateSpecification"]}
        if spec.get("LaunchTemplateId"):  # moto stores both; a request may name only one
            spec.pop("LaunchTemplateName", None)
        merged["LaunchTemplate"] = {**merged["LaunchTemplate"], "LaunchTemplateSpecification": spec}
        kwargs["mixed_instances_policy"] = merged
    _update_group(self, *args, **kwargs)


_log_group_attribute = LogGroup.get_cfn_attribute


def _log_group_attribute_as_aws(self: LogGroup, attribute_name: str) -> str:
    value = _log_group_attribute(self, attribute_name)
    return f"{value}:*" if attribute_name == "Arn" else value


def install() -> None:
    LogGroup.get_cfn_attribute = _log_group_attribute_as_aws  # type: ignore[method-assign]
    FakeAutoScalingGroup.update = _update_group_named_properties  # type: ignore[method-assign]
    FakeAutoScalingGroup.create_from_cloudformation_json = classmethod(_create_group_with_hooks)  # type: ignore[method-assign,assignment]
    AutoScalingResponse.complete_lifecycle_action = complete_lifecycle_action  # type: ignore[attr-defined]
    ResourceMap.load_parameters = _load_parameters_in_use  # type: ignore[method-assign]
    RouteTable.delete_from_cloudformation_json = classmethod(_delete_route_table)  # type: ignore[method-assign,assignment]
    parsing.clean_json = _clean_json_base64_of_text  # moto's own recursion looks the name up here
    moto_quotas.install()
    moto_regions.install()
    moto_launches.install()
    moto_iam.install()


if __name__ == "__main__":
    install()
    server.main()
