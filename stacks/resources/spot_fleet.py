"""The spot fleet: a launch template (IMDSv2, encrypted gp3 root, rendered user data) and an Auto
Scaling group with a mixed instances policy, 100% spot, price-capacity-optimized."""

from __future__ import annotations

from aws_cdk import Aws, CfnAutoScalingScheduledAction, CfnCondition, CfnTag, CfnUpdatePolicy, Fn
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from spot_trainer.settings import HOOK_ALLOWANCE_SECONDS
from stacks.console.construct_values import FleetValues

# Scale-in (a lower desired capacity, capacity rebalancing, the job's own scale to zero) waits in
# Terminating:Wait until the agent has its emergency checkpoint in S3 and completes this action.
DRAIN_HOOK = "spot-trainer-drain"
HOOK_TIMEOUT_MAX_SECONDS = 7200  # the longest a lifecycle hook's heartbeat may wait
IN_SERVICE_METRIC = "GroupInServiceInstances"


def group_name(job: str) -> str:
    """A fixed name: the role is scoped to it and user data carries it, without a dependency cycle."""
    return f"spot-trainer-{job}"


def group_arn(name: str) -> str:
    """The group's ARN holds a generated id; its name pins it to this job's group."""
    return (f"arn:{Aws.PARTITION}:autoscaling:{Aws.REGION}:{Aws.ACCOUNT_ID}"
            f":autoScalingGroup:*:autoScalingGroupName/{name}")


def drain_hook(grace_seconds: int) -> autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty:
    """CONTINUE by default: an agent that never answers delays termination, it never blocks it."""
    return autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty(
        lifecycle_hook_name=DRAIN_HOOK,
        lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
        heartbeat_timeout=min(HOOK_TIMEOUT_MAX_SECONDS, grace_seconds + HOOK_ALLOWANCE_SECONDS),
        default_result="CONTINUE",
    )


class SpotFleet(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job: str,
        values: FleetValues,
        type_count: int,
        subnet_ids: list[str],
        security_group_id: str,
        instance_profile: iam.InstanceProfile,
        user_data: str,
        userdata_version: str,
        root_device: str,
        capacity_rebalance: bool,
        grace_seconds: int,
        placement: str,
        standing_by: bool = False,
    ) -> None:
        """`standing_by`: a region the job may move to, its group at 0 instances until the job's controller
        sets it to the job's nodes."""
        super().__init__(scope, construct_id)
        job_tag = CfnTag(key="spot-trainer:job", value=job)
        tags = [job_tag, CfnTag(key="spot-trainer:userdata-version", value=userdata_version)]
        # Nodes close together in one AZ: the network gives the group a single subnet when this is set.
        self.placement_group = ec2.CfnPlacementGroup(self, "PlacementGroup", strategy=placement,
                                                     tags=[job_tag]) if placement else None
        has_key = CfnCondition(self, "KeyPairGiven", expression=Fn.condition_not(
            Fn.condition_equals(values.key_pair, "")))
        self.launch_template = ec2.CfnLaunchTemplate(
            self,
            "LaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                image_id=values.image_id,
                iam_instance_profile=ec2.CfnLaunchTemplate.IamInstanceProfileProperty(
                    arn=instance_profile.instance_profile_arn),
                security_group_ids=[security_group_id],
                key_name=Fn.condition_if(has_key.logical_id, values.key_pair,
                                         Aws.NO_VALUE).to_string(),
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_tokens="required", http_endpoint="enabled", http_put_response_hop_limit=2),
                block_device_mappings=[ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                    device_name=root_device,
                    ebs=ec2.CfnLaunchTemplate.EbsProperty(
                        volume_type="gp3", volume_size=values.volume_gib,
                        encrypted=True, delete_on_termination=True),
                )],
                user_data=Fn.base64(user_data),
                tag_specifications=[ec2.CfnLaunchTemplate.TagSpecificationProperty(resource_type=kind, tags=tags)
                                    for kind in ("instance", "volume")],
            ),
            tag_specifications=[ec2.CfnLaunchTemplate.LaunchTemplateTagSpecificationProperty(
                resource_type="launch-template", tags=tags)],
        )
        self.group_name = group_name(job)
        # A String split here rather than a CommaDelimitedList: both AWS and the local stand-in agree on it.
        types = Fn.split(",", values.instance_types, type_count)
        self.group = autoscaling.CfnAutoScalingGroup(
            self,
            "Group",
            auto_scaling_group_name=self.group_name,
            min_size="0",
            max_size=values.nodes,
            desired_capacity="0" if standing_by else values.nodes,
            vpc_zone_identifier=subnet_ids,
            placement_group=self.placement_group.ref if self.placement_group else None,
            capacity_rebalance=capacity_rebalance,
            # The stall alarm and the dashboard read how many instances are in service, minute by minute.
            metrics_collection=[autoscaling.CfnAutoScalingGroup.MetricsCollectionProperty(
                granularity="1Minute", metrics=[IN_SERVICE_METRIC])],
            lifecycle_hook_specification_list=[drain_hook(grace_seconds)],
            mixed_instances_policy=autoscaling.CfnAutoScalingGroup.MixedInstancesPolicyProperty(
                launch_template=autoscaling.CfnAutoScalingGroup.LaunchTemplateProperty(
                    launch_template_specification=autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty(
                        launch_template_id=self.launch_template.ref,
                        version=self.launch_template.attr_latest_version_number,
                    ),
                    overrides=[
                        autoscaling.CfnAutoScalingGroup.LaunchTemplateOverridesProperty(
                            instance_type=types[i])  # already Fn::Select(i, Fn::Split): linear in the count
                        for i in range(type_count)
                    ],
                ),
                instances_distribution=autoscaling.CfnAutoScalingGroup.InstancesDistributionProperty(
                    on_demand_base_capacity=0,
                    on_demand_percentage_above_base_capacity=0,  # 100% spot
                    spot_allocation_strategy="price-capacity-optimized",
                    spot_max_price=values.spot_max_price,  # "" = on-demand price cap
                ),
            ),
            tags=[autoscaling.CfnAutoScalingGroup.TagPropertyProperty(
                key="Name", value=f"spot-trainer-{job}", propagate_at_launch=True)],
        )
        # The agent sets the capacity to 0 when the job ends; a stack update re-applies DesiredCapacity
        # unless told to leave group sizes it did not change alone. (The market the deadline policy
        # chose is re-applied by an update that touches the mixed instances policy; the policy sets it
        # again within a minute.)
        # https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-updatepolicy.html
        self.group.cfn_options.update_policy = CfnUpdatePolicy(
            auto_scaling_scheduled_action=CfnAutoScalingScheduledAction(ignore_unmodified_group_size_properties=True))
