"""SpotTrainingStack: composes one construct per concern into the job's standalone stack."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnCondition, CfnOutput, Environment, Fn, IgnoreMode, LegacyStackSynthesizer, Stack, Token
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from spot_trainer.secret_refs import parse_refs
from spot_trainer.settings import env_setting
from stacks.console.construct_values import StackValues
from stacks.console.parameters import add_job_parameters
from stacks.console.rules import add_console_rules
from stacks.instance.header import user_data_header
from stacks.instance.runtime_wheel import runtime_wheel
from stacks.instance.user_data import render_user_data
from stacks.instance.user_data_budget import bound_user_data
from stacks.job.checkpoint_dir_field import shipped_path
from stacks.job.spec import SHIPPED_TRAINER_PACKAGE, JobSpec
from stacks.region_stacks import RegionStack, region_stacks
from stacks.resources.capacity_watch import CapacityWatch
from stacks.resources.checkpoint_bucket import CheckpointBucket
from stacks.resources.dashboard import JobDashboard
from stacks.resources.dataset_access import DatasetReadAccess
from stacks.resources.log_group import JobLogGroup
from stacks.resources.nag_suppressions import acknowledge_findings, acknowledge_other_regions
from stacks.resources.network import JobNetwork
from stacks.resources.notifications import JobTopic
from stacks.resources.regions_controller import RegionsController
from stacks.resources.secret_access import grant_secret_reads
from stacks.resources.spot_fleet import DRAIN_HOOK, SpotFleet, group_name
from stacks.resources.stall_alarm import StallAlarm
from stacks.resources.trainer_role import TrainerRole, s3_object_arn

METRICS_NAMESPACE: str = env_setting("SPOT_METRICS_NAMESPACE").default


class SpotTrainingStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, job: JobSpec, place: RegionStack | None = None,
                 **kwargs: Any) -> None:
        """`place`: which of the job's regions this stack is in (default: its only one, the deploy region)."""
        place = place or region_stacks(job)[0]
        if place.region:
            kwargs.setdefault("env", Environment(region=place.region))
        # The legacy synthesizer writes a standalone template: no BootstrapVersion rule, and no
        # bootstrap needed unless the job ships local code as an asset.
        kwargs.setdefault("synthesizer", LegacyStackSynthesizer())
        description = f"Spot Trainer job {job.name}" + (f": {job.description}" if job.description else "")
        kwargs.setdefault("description", description)
        super().__init__(scope, construct_id, **kwargs)
        params = add_job_parameters(self, job)
        values = StackValues.of(params)
        add_console_rules(self, values)
        bucket = CheckpointBucket(self, "Checkpoints", noncurrent_days=values.storage.noncurrent_days,
                                  existing_name=values.storage.existing_bucket,
                                  bucket_name=place.job_buckets(job.name).get(str(place.region)))
        logs = JobLogGroup(self, "Logs", job=job.name, retention_days=values.storage.log_retention_days)
        code_uri = self._code_asset_uri(job)
        trainer_package = self._trainer_package(job, values.trainer_package)
        topic = JobTopic(self, "Notifications", job=job.name, email=values.alerts.notify_email)
        job_buckets = place.job_buckets(job.name)
        other_buckets, lease_bucket = place.bucket_arns(job.name)
        role = TrainerRole(
            self, "TrainerRole", job=job.name, bucket_arn=bucket.arn, log_group_arn=logs.arn,
            group_name=group_name(job.name), metrics_namespace=METRICS_NAMESPACE, topic_arn=topic.arn,
            readable_objects=self._artifact_arns(job),
            other_buckets=other_buckets, lease_bucket=lease_bucket,
        )
        acknowledge_other_regions(self, job=job.name, bucket_arns=other_buckets)
        grant_secret_reads(role.role, parse_refs(job.run.secrets))
        DatasetReadAccess(self, "Dataset", role=role.role, bucket=values.data.bucket, prefix=values.data.prefix)
        network = JobNetwork(self, "Network", values=values.network,
                             one_az=job.capacity.placement == "cluster")
        header = user_data_header(job, params, made_by_stack={
            "SPOT_STACK": job.stack_name, "SPOT_BUCKET": bucket.name, "SPOT_ASG_NAME": group_name(job.name),
            "SPOT_LIFECYCLE_HOOK": DRAIN_HOOK, "SPOT_LOG_GROUP": logs.name, "SPOT_NOTIFY_TOPIC": topic.arn,
            "SPOT_CODE_URI": code_uri, "SPOT_TRAINER_PACKAGE": trainer_package,
            **({"SPOT_JOB_BUCKETS": ",".join(f"{r}={b}" for r, b in job_buckets.items())} if job_buckets else {})})
        bound_user_data(job, params, header)
        fleet = SpotFleet(
            self, "Fleet", job=job.name, values=values.fleet, type_count=len(job.capacity.instance_types),
            subnet_ids=network.subnet_ids, security_group_id=network.security_group.attr_group_id,
            instance_profile=role.instance_profile,
            user_data=render_user_data(job.userdata_version, header),
            userdata_version=job.userdata_version, root_device=job.capacity.root_device,
            capacity_rebalance=job.run.react_to_rebalance, grace_seconds=job.run.grace_seconds,
            placement=job.capacity.placement, standing_by=place.standing_by,
        )
        fleet.node.add_dependency(logs)  # the first instance logs from its first second
        # The policy exists before the first instance and outlives the last: a draining instance still
        # uploads and completes its lifecycle action while `cdk destroy` deletes the group.
        fleet.group.add_resource_dependency(role.policy)
        StallAlarm(self, "Stall", job=job.name, namespace=METRICS_NAMESPACE, group_name=fleet.group_name,
                   minutes=values.alerts.stall_minutes, topic_arn=topic.arn)
        if place.home:
            self._home_watch(job, place, values, fleet, bucket, topic, logs)
        acknowledge_findings(
            self, job=job.name, bucket_name=bucket.name,
            group_name=fleet.group_name, created_vpc=job.network.create,
            has_asset=self._code_asset is not None or self._runtime_asset is not None,
            data=(values.data.bucket, values.data.prefix),
        )
        CfnOutput(self, "CheckpointBucket", value=bucket.name,
                  description="Checkpoints and the env cache (env-cache/) live here; cdk destroy keeps it")
        CfnOutput(self, "AutoScalingGroup", value=fleet.group_name)
        CfnOutput(self, "LogGroup", value=logs.name)
        CfnOutput(self, "NotificationTopic", value=topic.arn)

    def _home_watch(self, job: JobSpec, place: RegionStack, values: StackValues, fleet: SpotFleet,
                    bucket: CheckpointBucket, topic: JobTopic, logs: JobLogGroup) -> None:
        """Home's: the dashboard (its name is the account's, in every region) and what watches the job's capacity,
        the capacity watch, or for a job of several regions the regions controller, which applies its rules too."""
        JobDashboard(self, "Dashboard", job=job.name, namespace=METRICS_NAMESPACE, group_name=fleet.group_name)
        if place.several:
            RegionsController(
                self, "Regions", job=job.name, regions=job.capacity.regions, group_name=fleet.group_name,
                nodes=values.fleet.nodes, instance_types=values.fleet.instance_types,
                region_wait=job.capacity.region_wait, max_spot_wait=values.watch.max_spot_wait,
                runtime=self._runtime_wheel(), topic_arn=topic.arn, log_group=logs.name, log_group_arn=logs.arn)
            return
        CapacityWatch(
            self, "CapacityWatch", job=job.name, group_name=fleet.group_name, bucket_arn=bucket.arn,
            bucket_name=bucket.name, topic_arn=topic.arn, log_group=logs.name, log_group_arn=logs.arn,
            values=values.watch,
        )

    def _code_asset_uri(self, job: JobSpec) -> str:
        self._code_asset: s3_assets.Asset | None = None
        if job.workdir_path is None:
            return ""
        # gitignore's "/outputs/": that folder at the top only, whatever a local run left in it.
        inside = shipped_path(job.run)
        excluded: dict[str, Any] = {"ignore_mode": IgnoreMode.GIT, "exclude": [f"/{inside}/"]} if inside else {}
        self._code_asset = s3_assets.Asset(self, "JobCode", path=str(job.workdir_path), **excluded)
        self._ignore_asset_hash_parameters()
        return str(self._code_asset.s3_object_url)

    def _trainer_package(self, job: JobSpec, package_parameter: str) -> str:
        """What user data installs: the package given at deploy, or when it is empty (the default of a job
        that names no package) the wheel of this checkout, shipped with the stack as an asset."""
        self._runtime_asset: s3_assets.Asset | None = None
        if job.run.trainer_package != SHIPPED_TRAINER_PACKAGE:
            return package_parameter
        self._runtime_asset = self._runtime_wheel()
        shipped = CfnCondition(self, "ShipsRuntime",
                               expression=Fn.condition_equals(package_parameter, ""))
        return str(Token.as_string(Fn.condition_if(shipped.logical_id, self._runtime_asset.s3_object_url,
                                                       package_parameter)))

    def _runtime_wheel(self) -> s3_assets.Asset:
        """The wheel of this checkout as an asset, made once: what instances install and the controller runs."""
        if self._runtime_asset is None:
            self._runtime_asset = s3_assets.Asset(self, "Runtime", path=str(runtime_wheel()))
            self._ignore_asset_hash_parameters()
        return self._runtime_asset

    def _ignore_asset_hash_parameters(self) -> None:
        """The legacy synthesizer declares an artifact-hash parameter per asset that nothing references."""
        metadata = dict(self.template_options.metadata or {})
        self.template_options.metadata = {**metadata, "cfn-lint": {"config": {"ignore_checks": ["W2001"]}}}

    def _artifact_arns(self, job: JobSpec) -> list[str]:
        arns = [s3_object_arn(job.run.trainer_package)] if job.run.trainer_package.startswith("s3://") else []
        for asset in (self._code_asset, self._runtime_asset):
            if asset is not None:
                arns.append(asset.bucket.arn_for_objects(asset.s3_object_key))
        return arns
