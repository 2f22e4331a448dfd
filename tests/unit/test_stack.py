"""Intent-level assertions on the synthesized stack of each construct, plus lint/nag/snapshot gates."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk.assertions import Match

from stacks.instance.user_data import export_line
from stacks.job.spec import JOBS_DIR
from stacks.synth.template_size import INLINE_TEMPLATE_LIMIT, inline_template_bytes, too_large_warning
from tests.unit.stack_support import JOBS, Synthesized, synth, user_data_text

SNAPSHOTS = Path(__file__).parent / "snapshots"


@pytest.fixture(scope="module")
def example(synthesized: dict[str, Synthesized]) -> Synthesized:
    return synthesized["example"]


def test_bucket_is_versioned_encrypted_private_and_retained(example: Synthesized) -> None:
    example.template.has_resource("AWS::S3::Bucket", {
        "DeletionPolicy": "Retain",
        "Properties": Match.object_like({
            "VersioningConfiguration": {"Status": "Enabled"},
            "BucketEncryption": Match.any_value(),
            "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                               "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
            "LifecycleConfiguration": {"Rules": Match.array_with([
                Match.object_like({"AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}),
                Match.object_like({"NoncurrentVersionExpiration": {
                    "NoncurrentDays": {"Ref": "CheckpointVersionRetentionDays"}}}),
            ])},
        }),
    })
    example.template.has_resource_properties("AWS::S3::BucketPolicy", {"PolicyDocument": {"Statement": [
        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]}})


def test_launch_template_requires_imdsv2_and_encrypts_gp3_root(example: Synthesized) -> None:
    data = example.one("AWS::EC2::LaunchTemplate")["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    (root,) = data["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/xvda"
    assert root["Ebs"] == {"DeleteOnTermination": True, "Encrypted": True, "VolumeType": "gp3",
                           "VolumeSize": {"Ref": "VolumeSize"}}
    assert data["ImageId"] == {"Ref": "ImageId"}
    assert "InstanceMarketOptions" not in data  # spot settings live only in the group


def test_image_parameter_is_an_ssm_image_type_defaulting_to_the_job_ami(synthesized: dict[str, Synthesized]) -> None:
    image = synthesized["cifar"].raw["Parameters"]["ImageId"]
    assert image["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    # The PyTorch DLAMI: torch and CUDA are on the image, not installed by every instance.
    assert image["Default"] == \
        "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.12-ubuntu-24.04/latest/ami-id"


def test_group_is_all_spot_price_capacity_optimized_across_types(synthesized: dict[str, Synthesized]) -> None:
    cifar = synthesized["cifar"]
    group = cifar.one("AWS::AutoScaling::AutoScalingGroup")
    assert group["MinSize"] == "0"
    assert group["DesiredCapacity"] == {"Ref": "Nodes"}
    assert group["AutoScalingGroupName"] == "spot-trainer-cifar"
    assert group["CapacityRebalance"] is True  # cifar reacts to rebalance recommendations
    policy = group["MixedInstancesPolicy"]
    assert policy["InstancesDistribution"] == {
        "OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0,
        "SpotAllocationStrategy": "price-capacity-optimized", "SpotMaxPrice": {"Ref": "SpotMaxPrice"}}
    overrides = policy["LaunchTemplate"]["Overrides"]
    assert [o["InstanceType"]["Fn::Select"][0] for o in overrides] == [0, 1, 2, 3]
    assert cifar.raw["Parameters"]["InstanceTypes"]["Default"] == "g5.xlarge,g6.xlarge,g4dn.xlarge,g5.2xlarge"
    assert cifar.raw["Parameters"]["SpotMaxPrice"]["Default"] == "0.6"


@pytest.mark.parametrize("job", JOBS)
def test_a_stack_update_leaves_the_capacity_the_job_set_alone(synthesized: dict[str, Synthesized], job: str) -> None:
    """DesiredCapacity is Nodes at create; the agent scales the group to 0 when the job ends. An update
    that does not change Nodes must not launch a finished job again (CloudFormation re-applies group
    sizes on every update unless the group's UpdatePolicy says to leave unchanged ones alone)."""
    (group,) = synthesized[job].resources("AWS::AutoScaling::AutoScalingGroup").values()
    assert group["Properties"]["DesiredCapacity"] == {"Ref": "Nodes"}
    assert group["UpdatePolicy"] == {"AutoScalingScheduledAction": {"IgnoreUnmodifiedGroupSizeProperties": True}}


def test_scale_in_waits_for_the_agent_through_a_termination_hook(synthesized: dict[str, Synthesized]) -> None:
    example = synthesized["example"]
    (hook,) = example.one("AWS::AutoScaling::AutoScalingGroup")["LifecycleHookSpecificationList"]
    assert hook["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
    assert hook["DefaultResult"] == "CONTINUE", "an agent that never answers must not keep the instance"
    assert hook["HeartbeatTimeout"] == 60 + 300  # the job's grace period, then time for the upload
    # The agent is told the same name, and its role may complete actions on its own group only.
    assert export_line("SPOT_LIFECYCLE_HOOK", hook["LifecycleHookName"]) in user_data_text(example)
    assert "autoscaling:CompleteLifecycleAction" in _role_statements(example)["OwnGroup"]["Action"]


def _policies(synth: Synthesized) -> tuple[dict, dict]:
    """(the role's own policy, the dataset policy that exists only when DataBucket is given)."""
    policies = synth.resources("AWS::IAM::Policy")
    (dataset,) = [logical_id for logical_id, policy in policies.items() if "Condition" in policy]
    (own,) = [policy for logical_id, policy in policies.items() if logical_id != dataset]
    return own["Properties"], {**policies[dataset]["Properties"], "Condition": synth.condition_of(dataset)}


def _role_statements(synth: Synthesized) -> dict[str, dict]:
    return {s["Sid"]: s for s in _policies(synth)[0]["PolicyDocument"]["Statement"]}


def test_role_is_scoped_to_the_job_prefix_log_group_and_own_group(example: Synthesized) -> None:
    statements = _role_statements(example)
    bucket_id = next(iter(example.resources("AWS::S3::Bucket")))
    bucket_name = {"Fn::If": [example.condition_of(bucket_id), {"Ref": bucket_id}, {"Ref": "ExistingBucket"}]}
    assert statements["JobCheckpoints"]["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", bucket_name, "/example/*"]]}
    # "example/*": listing reaches this job's keys only, never those of a job named "example2".
    assert statements["ListJobPrefix"]["Condition"] == {"StringLike": {"s3:prefix": ["example/*"]}}
    assert "autoScalingGroupName/spot-trainer-example" in json.dumps(statements["OwnGroup"]["Resource"])
    assert statements["JobMetrics"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "SpotTrainer"}}
    everything = json.dumps(statements)
    assert '"s3:*"' not in everything and '"Action": "*"' not in everything


def _instance_role(synth: Synthesized) -> dict:
    """The instances' role (the capacity watch has one of its own)."""
    (role,) = [r["Properties"] for r in synth.resources("AWS::IAM::Role").values()
               if "ec2.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])]
    return role


def test_the_role_reads_no_ssm_parameter_and_keeps_session_manager(example: Synthesized) -> None:
    role = _instance_role(example)
    assert "ManagedPolicyArns" not in role, "a managed policy would grant more than the statements below"
    actions = [a for s in _role_statements(example).values() for a in ([s["Action"]] if isinstance(s["Action"], str)
                                                                       else s["Action"])]
    assert not [a for a in actions if a.startswith("ssm:Get") or a in ("ssm:*", "*")]
    assert {"ssm:UpdateInstanceInformation", "ssmmessages:OpenDataChannel"} <= set(actions)


def test_the_dataset_a_job_reads_is_readable_and_nothing_else_of_its_bucket(
    synthesized: dict[str, Synthesized]
) -> None:
    cifar = synthesized["cifar"]  # train_args: --data s3://my-datasets/cifar10
    defaults = {name: cifar.raw["Parameters"][name]["Default"] for name in ("DataBucket", "DataPrefix")}
    assert defaults == {"DataBucket": "my-datasets", "DataPrefix": "cifar10/"}
    assert synthesized["example"].raw["Parameters"]["DataBucket"]["Default"] == ""  # synthetic data
    dataset = _policies(cifar)[1]
    # Granted only when the console (or the job file) names a bucket; "cifar10/" never lists cifar100/.
    assert cifar.raw["Conditions"][dataset["Condition"]] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "DataBucket"}, ""]}]}
    statements = {s["Sid"]: s for s in dataset["PolicyDocument"]["Statement"]}
    assert statements["ReadData"]["Action"] == "s3:GetObject"
    assert statements["ReadData"]["Resource"] == {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":s3:::", {"Ref": "DataBucket"}, "/", {"Ref": "DataPrefix"}, "*"]]}
    assert statements["ListData"]["Condition"] == {
        "StringLike": {"s3:prefix": [{"Fn::Join": ["", [{"Ref": "DataPrefix"}, "*"]]}]}}
    assert "ReadData" not in _role_statements(cifar)


def test_job_code_asset_is_readable_object_by_object(synthesized: dict[str, Synthesized]) -> None:
    byo = synthesized["byo"]
    artifacts = _role_statements(byo)["JobArtifacts"]
    assert artifacts["Action"] == "s3:GetObject"
    assert "/*" not in json.dumps(artifacts["Resource"])
    assert "SPOT_CODE_URI=$(printf %s" in user_data_text(byo)  # a deploy-time value (the asset URI)


def test_an_existing_bucket_replaces_the_created_one(tmp_path: Path) -> None:
    job = tmp_path / "resume.toml"
    job.write_text((JOBS_DIR / "example.toml").read_text().replace(
        "[storage]\n", '[storage]\nbucket = "kept-checkpoints"\n'))
    synthesized = synth(str(job), tmp_path / "out")
    assert synthesized.raw["Parameters"]["ExistingBucket"]["Default"] == "kept-checkpoints"
    # Bucket and SSL-only policy exist only when no bucket is named; everything else takes the name.
    conditional = {synthesized.condition_of(logical_id) for kind in ("AWS::S3::Bucket", "AWS::S3::BucketPolicy")
                   for logical_id in synthesized.resources(kind)}
    (create,) = conditional
    assert synthesized.raw["Conditions"][create] == {"Fn::Equals": [{"Ref": "ExistingBucket"}, ""]}
    chosen = json.dumps({"Fn::If": [create, {"Ref": next(iter(synthesized.resources("AWS::S3::Bucket")))},
                                     {"Ref": "ExistingBucket"}]})
    assert chosen in json.dumps(synthesized.raw["Outputs"]["CheckpointBucket"])
    assert chosen in json.dumps(synthesized.one("AWS::EC2::LaunchTemplate")["LaunchTemplateData"]["UserData"])
    assert chosen in json.dumps(_role_statements(synthesized)["JobCheckpoints"])


def test_log_group_has_job_name_and_retention_parameter(example: Synthesized) -> None:
    example.template.has_resource("AWS::Logs::LogGroup", {
        "DeletionPolicy": "Delete",
        "Properties": {"LogGroupName": "/spot-trainer/example", "RetentionInDays": {"Ref": "LogRetentionDays"}}})


def _ingress_by_port(synth: Synthesized) -> dict[int, dict]:
    rules = synth.resources("AWS::EC2::SecurityGroupIngress").values()
    return {rule["Properties"]["FromPort"]: rule for rule in rules}


def test_nothing_gets_in_unless_asked(example: Synthesized) -> None:
    assert "SecurityGroupIngress" not in example.one("AWS::EC2::SecurityGroup")
    rules = _ingress_by_port(example)
    assert set(rules) == {22, 0}  # SSH, and the peers of a distributed job
    conditions = {port: example.raw["Conditions"][rule["Condition"]] for port, rule in rules.items()}
    assert conditions == {22: {"Fn::Not": [{"Fn::Equals": [{"Ref": "SshCidr"}, ""]}]},
                          0: {"Fn::Equals": [{"Ref": "Distributed"}, "true"]}}
    defaults = {name: example.raw["Parameters"][name]["Default"] for name in ("SshCidr", "KeyPair", "Distributed")}
    assert defaults == {"SshCidr": "", "KeyPair": "", "Distributed": "false"}


def test_distributed_nodes_reach_each_other_and_only_each_other(synthesized: dict[str, Synthesized]) -> None:
    multinode = synthesized["multinode"]
    peers = _ingress_by_port(multinode)[0]["Properties"]
    (group_id,) = multinode.resources("AWS::EC2::SecurityGroup")
    itself = {"Fn::GetAtt": [group_id, "GroupId"]}
    assert peers["GroupId"] == itself and peers["SourceSecurityGroupId"] == itself
    assert (peers["IpProtocol"], peers["FromPort"], peers["ToPort"]) == ("tcp", 0, 65535)
    assert not {"CidrIp", "CidrIpv6", "SourcePrefixListId"} & set(peers)
    assert multinode.raw["Parameters"]["Distributed"]["Default"] == "true"


def test_a_cluster_placement_group_holds_the_nodes_in_one_created_subnet(
    synthesized: dict[str, Synthesized]
) -> None:
    multinode = synthesized["multinode"]  # placement = "cluster", network created by the stack
    (placement_id, placement), = multinode.resources("AWS::EC2::PlacementGroup").items()
    assert placement["Properties"]["Strategy"] == "cluster"
    group = multinode.one("AWS::AutoScaling::AutoScalingGroup")
    assert group["PlacementGroup"] == {"Ref": placement_id}
    (subnet,) = group["VPCZoneIdentifier"]
    assert subnet["Ref"] in multinode.resources("AWS::EC2::Subnet")
    assert len(multinode.resources("AWS::EC2::Subnet")) > 1  # the VPC keeps its AZs, the group uses one


def test_without_a_placement_the_group_spreads_over_every_subnet(synthesized: dict[str, Synthesized]) -> None:
    cifar = synthesized["cifar"]
    group = cifar.one("AWS::AutoScaling::AutoScalingGroup")
    assert not cifar.resources("AWS::EC2::PlacementGroup") and "PlacementGroup" not in group
    assert {s["Ref"] for s in group["VPCZoneIdentifier"]} == set(cifar.resources("AWS::EC2::Subnet"))


def test_a_cluster_job_choosing_its_network_at_deploy_picks_one_subnet(tmp_path: Path) -> None:
    job = tmp_path / "pick.toml"
    job.write_text((JOBS_DIR / "multinode.toml").read_text() + '\n[network]\nsubnets = "parameter"\n')
    synthesized = synth(str(job), tmp_path / "out")
    assert synthesized.raw["Parameters"]["Subnets"]["Type"] == "AWS::EC2::Subnet::Id"  # the console offers one
    assert synthesized.one("AWS::AutoScaling::AutoScalingGroup")["VPCZoneIdentifier"] == [{"Ref": "Subnets"}]
    result = cfn_lint(next(synthesized.outdir.glob("*.template.json")))
    assert result.returncode == 0, result.stdout + result.stderr


def _header_at_boot(synth: Synthesized, names: tuple[str, ...], **typed: str) -> dict[str, str]:
    """The user data header run by bash with each parameter at its default or as `typed` in the console:
    the values the agent receives."""
    user_data = synth.one("AWS::EC2::LaunchTemplate")["LaunchTemplateData"]["UserData"]["Fn::Base64"]
    values = {name: str(p.get("Default", "x")) for name, p in synth.raw["Parameters"].items()} | typed

    def deployed(part: str | dict) -> str:  # what CloudFormation puts in place of an intrinsic
        if isinstance(part, str):
            return part
        inner = part.get("Fn::Base64")
        value = values.get(inner["Ref"], "x") if isinstance(inner, dict) and "Ref" in inner else "x"
        return base64.b64encode(value.encode()).decode() if inner is not None else value

    text = "".join(map(deployed, user_data["Fn::Join"][1]))
    script = text.split("# --- end of header ---")[0] + "".join(f'printf "%s\\n" "${name}"\n' for name in names)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines(), strict=True))


MULTI_NODE_HEADER = ("SPOT_DISTRIBUTED", "SPOT_MIN_NODES", "SPOT_MAX_NODES")


def test_the_agent_is_told_whether_and_on_how_many_nodes_to_train(synthesized: dict[str, Synthesized]) -> None:
    assert _header_at_boot(synthesized["multinode"], MULTI_NODE_HEADER) == {
        "SPOT_DISTRIBUTED": "true", "SPOT_MIN_NODES": "2", "SPOT_MAX_NODES": "3"}
    assert _header_at_boot(synthesized["cifar"], MULTI_NODE_HEADER) == {
        "SPOT_DISTRIBUTED": "false", "SPOT_MIN_NODES": "1", "SPOT_MAX_NODES": "1"}


def test_the_console_settings_reach_the_agent(synthesized: dict[str, Synthesized]) -> None:
    typed = {"Distributed": "false", "MinNodes": "4", "Nodes": "6"}
    assert _header_at_boot(synthesized["multinode"], MULTI_NODE_HEADER, **typed) == {
        "SPOT_DISTRIBUTED": "false", "SPOT_MIN_NODES": "4", "SPOT_MAX_NODES": "6"}


SCHEDULE_HEADER = ("SPOT_NOTIFY_TOPIC", "SPOT_DEADLINE", "SPOT_TOTAL_STEPS", "SPOT_MAX_SPOT_WAIT",
                   "SPOT_DEADLINE_MARGIN", "SPOT_BUDGET_USD")


def test_the_schedule_and_the_topic_reach_the_agent(synthesized: dict[str, Synthesized]) -> None:
    cifar = synthesized["cifar"]
    assert _header_at_boot(cifar, SCHEDULE_HEADER) == {
        "SPOT_NOTIFY_TOPIC": "x",  # the topic's ARN, a deploy-time value (Ref of the topic)
        "SPOT_DEADLINE": "", "SPOT_TOTAL_STEPS": "", "SPOT_MAX_SPOT_WAIT": "", "SPOT_DEADLINE_MARGIN": "30m",
        "SPOT_BUDGET_USD": ""}
    typed = {"Deadline": "2026-12-01T18:00:00Z", "TotalSteps": "5000", "MaxSpotWait": "2h", "DeadlineMargin": "45m",
             "BudgetUSD": "120.5"}
    assert _header_at_boot(cifar, SCHEDULE_HEADER[1:], **typed) == {
        "SPOT_DEADLINE": "2026-12-01T18:00:00Z", "SPOT_TOTAL_STEPS": "5000", "SPOT_MAX_SPOT_WAIT": "2h",
        "SPOT_DEADLINE_MARGIN": "45m", "SPOT_BUDGET_USD": "120.5"}
    (topic,) = cifar.resources("AWS::SNS::Topic")
    assert {"Fn::Base64": {"Ref": topic}} in _user_data_parts(cifar)


def _user_data_parts(synth: Synthesized) -> list:
    return synth.one("AWS::EC2::LaunchTemplate")["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]


def test_a_v1_job_keeps_the_header_its_bootstrap_was_written_for(tmp_path: Path) -> None:
    job = tmp_path / "old.toml"
    job.write_text('userdata_version = "v1"\n' + (JOBS_DIR / "example.toml").read_text().replace(
        "[run]\n", '[run]\ntrainer_package = "spot-trainer==0.1.0"\n'))
    text = user_data_text(synth(str(job), tmp_path / "out"))
    assert "SPOT_KEEP_CHECKPOINTS=" in text
    assert not [name for name in MULTI_NODE_HEADER + SCHEDULE_HEADER if name in text]


def test_a_setting_without_a_parameter_reaches_the_instance_only_when_the_job_sets_it(tmp_path: Path) -> None:
    job = tmp_path / "late.toml"
    job.write_text((JOBS_DIR / "example.toml").read_text().replace("[run]\n", "[run]\nsave_warn_seconds = 7200\n"))
    assert "export SPOT_SAVE_WARN_SECONDS=7200\n" in user_data_text(synth(str(job), tmp_path / "late"))
    assert "SPOT_SAVE_WARN_SECONDS" not in user_data_text(synth("example", tmp_path / "default"))


def test_a_pinned_torch_and_a_cache_turned_off_reach_the_instance(tmp_path: Path) -> None:
    job = tmp_path / "pinned.toml"
    job.write_text((JOBS_DIR / "example.toml").read_text().replace(
        "[run]\n", '[run]\ntorch = "torch==2.13.0"\nenv_cache = false\n'))
    text = user_data_text(synth(str(job), tmp_path / "pinned"))
    assert "export SPOT_TORCH_SPEC=torch==2.13.0\n" in text and "export SPOT_ENV_CACHE=false\n" in text


def test_a_v1_stack_renders_the_same_user_data_byte_for_byte(tmp_path: Path) -> None:
    """Its instances were launched with it: an update must not hand them another script."""
    job = tmp_path / "old.toml"
    job.write_text('userdata_version = "v1"\n[run]\ntrainer_package = "spot-trainer==0.1.0"\ngrace_seconds = 300\n'
                   'train_args = "--model lm --steps 100 --synthetic"\n[capacity]\ninstance_types = ["g5.xlarge"]\n')
    text = user_data_text(synth(str(job), tmp_path / "out"))
    assert hashlib.sha256(text.encode()).hexdigest() == V1_USER_DATA_SHA256


V1_USER_DATA_SHA256 = "4c2ce9a9854f60f52ca8ddf70f6e493e93103c3dd4ccb73eb8779ed84bc57e14"  # as launched


def test_parameters_are_grouped_in_the_order_a_person_thinks(example: Synthesized) -> None:
    interface = example.raw["Metadata"]["AWS::CloudFormation::Interface"]
    assert [g["Label"]["default"] for g in interface["ParameterGroups"]] == [
        "What to run", "Capacity", "Network", "Schedule and alerts", "Storage", "Access"]
    grouped = [p for g in interface["ParameterGroups"] for p in g["Parameters"]]
    # Every parameter a person fills is grouped and labelled; `cdk deploy` fills the assets' own.
    typed = [name for name in example.raw["Parameters"] if not name.startswith("AssetParameters")]
    assert sorted(grouped) == sorted(typed)
    assert set(interface["ParameterLabels"]) == set(grouped)
    assert example.raw["Parameters"]["Subnets"]["Type"] == "List<AWS::EC2::Subnet::Id>"
    assert example.raw["Parameters"]["VpcId"]["Type"] == "AWS::EC2::VPC::Id"
    assert example.raw["Parameters"]["TrainingCommand"]["Default"] == "builtin"


def test_created_network_has_no_nat_and_no_network_parameters(synthesized: dict[str, Synthesized]) -> None:
    cifar = synthesized["cifar"]
    assert cifar.resources("AWS::EC2::VPC") and not cifar.resources("AWS::EC2::NatGateway")
    assert "Subnets" not in cifar.raw["Parameters"]


@pytest.mark.parametrize("job", JOBS)
def test_template_is_standalone_and_user_data_fits(synthesized: dict[str, Synthesized], job: str) -> None:
    synth = synthesized[job]
    assert "BootstrapVersion" not in synth.raw.get("Rules", {})
    assert "BootstrapVersion" not in synth.raw.get("Parameters", {})
    text = user_data_text(synth, placeholder="x" * 64)  # generous room for deploy-time values
    assert len(text.encode()) < 16 * 1024
    assert text.startswith("#!/")
    assert "export SPOT_USERDATA_VERSION=v2" in text and f"export SPOT_JOB={job}" in text
    (template_tags,) = synth.one("AWS::EC2::LaunchTemplate")["TagSpecifications"]
    assert {"Key": "spot-trainer:userdata-version", "Value": "v2"} in template_tags["Tags"]


PINNED_RUNTIME = 'trainer_package = "s3://my-artifacts/spot_trainer-0.2.0-py3-none-any.whl"'


def pinned(job: str, folder: Path, instance_types: list[str] | None = None) -> Synthesized:
    """The job with its runtime named in S3 rather than shipped: no asset, unless it ships its own code."""
    text = (JOBS_DIR / f"{job}.toml").read_text().replace("[run]\n", f"[run]\n{PINNED_RUNTIME}\n", 1)
    if instance_types is not None:
        listed = ", ".join(f'"{name}"' for name in instance_types)
        text = re.sub(r"(?m)^instance_types = .*$", f"instance_types = [{listed}]", text)
    (folder / f"{job}.toml").write_text(text)
    return synth(str(folder / f"{job}.toml"), folder / "out")


def cli_yaml_bytes(outdir: Path) -> int:
    """The template as the CDK CLI itself writes it (its YAML serializer, the one `cdk deploy` measures)."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_DISABLE_VERSION_CHECK": "1"}
    shown = subprocess.run(["npx", "--no-install", "cdk", "synth", "--app", str(outdir)], cwd=JOBS_DIR.parent, env=env,
                           capture_output=True, text=True, timeout=120, check=True)
    return len(shown.stdout.rstrip("\n").encode())


@pytest.mark.parametrize("job", ["example", "deadline", "cifar", "multinode"])
def test_without_the_bootstrap_a_template_fits_inline_or_the_synth_says_so(job: str, tmp_path: Path) -> None:
    """A job that names its runtime in S3 and ships no code is the one kind that may deploy without `cdk
    bootstrap`: CloudFormation takes 51,200 bytes inline, counted on the YAML the CLI sends. The synth's
    estimate is the CLI's own count to within a few bytes, and it warns before that count is reached."""
    synthesized = pinned(job, tmp_path)
    assert not any(name.startswith("AssetParameters") for name in synthesized.raw["Parameters"])
    measured = cli_yaml_bytes(synthesized.outdir)
    assert abs(inline_template_bytes(synthesized.raw) - measured) <= 0.002 * measured
    warning = too_large_warning(job, synthesized.raw, has_assets=False)
    if measured > INLINE_TEMPLATE_LIMIT:
        assert warning is not None and "npx cdk bootstrap" in warning, measured
    elif measured < 0.98 * INLINE_TEMPLATE_LIMIT:
        assert warning is None, measured


@pytest.mark.parametrize("job", JOBS)
def test_cdk_nag_has_no_unacknowledged_finding_and_each_has_a_reason(
    synthesized: dict[str, Synthesized], job: str
) -> None:
    report = synthesized[job].validation_report()
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success", nag["violations"]
    assert nag["suppressedViolations"] and all(len(s["reason"]) > 20 for s in nag["suppressedViolations"])


def cfn_lint(*templates: Path) -> subprocess.CompletedProcess[str]:
    """One cfn-lint run over the templates (its rule set loads once: a run per template costs it again each)."""
    command = [str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", *map(str, templates)]
    return subprocess.run(command, capture_output=True, text=True)


@pytest.fixture(scope="module")
def cfn_lint_findings(synthesized: dict[str, Synthesized]) -> dict[str, list[str]]:
    """Each shipped job's cfn-lint findings (one `path:line:column:…:rule:message` line each), one run for all."""
    templates = {job: next(synthesized[job].outdir.glob("*.template.json")) for job in JOBS}
    result = cfn_lint(*templates.values())
    assert result.returncode % 2 == 0, result.stderr  # 2, 4, 8: findings by level; odd: cfn-lint itself failed
    lines = result.stdout.splitlines()
    return {job: [line for line in lines if line.startswith(str(path))] for job, path in templates.items()}


@pytest.mark.parametrize("job", JOBS)
def test_cfn_lint_is_clean(cfn_lint_findings: dict[str, list[str]], job: str) -> None:
    assert cfn_lint_findings[job] == []


@pytest.mark.parametrize("job", JOBS)
def test_snapshot(synthesized: dict[str, Synthesized], job: str) -> None:
    snapshot = SNAPSHOTS / f"{job}.json"
    current = without_asset_hashes(json.dumps(synthesized[job].raw, indent=1, sort_keys=True))
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snapshot.write_text(current + "\n")
    assert snapshot.exists(), f"no snapshot for job {job}: review its template, then UPDATE_SNAPSHOTS=1"
    assert current + "\n" == snapshot.read_text(), "template changed: review, then UPDATE_SNAPSHOTS=1"


def without_asset_hashes(template: str) -> str:
    """A job's shipped code is an asset named by its content hash (in parameter names and their logical
    ids' suffixes): editing a script is not a template change."""
    template = re.sub(r"[0-9a-f]{64}", "ASSET", template)
    return re.sub(r"(ASSET(?:S3Bucket|S3VersionKey|ArtifactHash))[0-9A-F]{8}", r"\1", template)


def test_an_unacknowledged_finding_fails_synth(tmp_path: Path) -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    from app import build_app

    app = cdk.App(context={"job": "example"}, outdir=str(tmp_path), analytics_reporting=False)
    s3.Bucket(build_app(app), "PlainBucket")  # no SSL-only policy: AwsSolutions-S10
    with pytest.raises(Exception, match="AwsSolutions-S10"):
        app.synth()


def test_forty_instance_types_deploy_with_the_shipped_runtime_and_are_named_without_it(tmp_path: Path) -> None:
    """Each type costs a constant (about 190 bytes of YAML). Forty of them pass the inline limit: with the
    runtime shipped (the default, an asset) the CLI sends the template through the bootstrap bucket
    anyway; with a runtime named in S3 the synth says so in one line, naming `cdk bootstrap`."""
    every = [f"{family}.{size}" for family in ("r6i", "c6i", "c7i", "m5", "m6i", "r5")
             for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")]
    stacks, sizes = {}, {}
    for count in (1, 40):
        (tmp_path / str(count)).mkdir()
        stacks[count] = pinned("example", tmp_path / str(count), every[:count])
        sizes[count] = cli_yaml_bytes(stacks[count].outdir)
    assert sizes[40] - sizes[1] < 39 * 250, f"each extra type should add a few hundred bytes: {sizes}"
    assert sizes[40] > INLINE_TEMPLATE_LIMIT
    forty = stacks[40]
    warning = too_large_warning("SpotTrainer-example", forty.raw, has_assets=False)
    assert warning is not None and "npx cdk bootstrap" in warning and "fewer instance types" in warning
    assert too_large_warning("SpotTrainer-example", forty.raw, has_assets=True) is None
    assert len(json.dumps(forty.raw)) < 1_000_000  # the bootstrap bucket's limit


def deployed_user_data(synth: Synthesized, typed: dict[str, str]) -> bytes:
    """The launch template's user data as EC2 receives it: each parameter as `typed` (else its default),
    each name only known at deploy time as long as AWS allows (bucket 63, region 20, topic ARN 256)."""
    user_data = synth.one("AWS::EC2::LaunchTemplate")["LaunchTemplateData"]["UserData"]["Fn::Base64"]
    _, parts = user_data["Fn::Join"]
    parameters = synth.raw["Parameters"]
    text = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
            continue
        ref = part["Fn::Base64"].get("Ref")
        if ref in parameters:
            value = typed.get(ref, parameters[ref].get("Default", ""))
        else:  # the bucket (Fn::If of two names), the region, the topic's ARN
            value = "x" * {None: 63, "AWS::Region": 20}.get(ref, 256)
        text.append(base64.b64encode(str(value).encode()).decode())
    return "".join(text).encode()


@pytest.mark.parametrize("job", JOBS)
def test_every_typed_parameter_at_its_longest_still_fits_ec2s_user_data_limit(
    synthesized: dict[str, Synthesized], job: str
) -> None:
    parameters = synthesized[job].raw["Parameters"]
    longest = {name: "b" * int(p["MaxLength"]) for name, p in parameters.items() if "MaxLength" in p}
    assert set(longest) >= {"TrainingCommand", "TrainArguments", "SetupCommand", "TrainerPackage", "WorkingDirectory"}
    # Room for a real command: 900 characters each at least, beside the bootstrap and its env cache.
    assert all(len(value) >= 900 for value in longest.values()), "room for a real command"
    assert len(deployed_user_data(synthesized[job], longest)) <= 16 * 1024


def test_a_runtime_named_at_synth_is_checked_as_the_job_files(tmp_path: Path) -> None:
    """`-c trainer_package=…` (what the console command passes) meets the job file's own rule."""
    import aws_cdk as cdk

    from app import build_app
    from stacks.job.spec import JobSpecError

    app = cdk.App(context={"job": "example", "trainer_package": "spot-trainer"}, outdir=str(tmp_path))
    with pytest.raises(JobSpecError, match=r"run.trainer_package: 'spot-trainer' is not pinned to one version"):
        build_app(app)
