"""A job that lists several regions: one stack per region, home first, each able to take the job without a deploy."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest

from app import build_app
from stacks.job.spec import JOBS_DIR
from tests.unit.stack_support import CDK_JSON_CONTEXT
from tests.unit.test_role_permissions import REGIONS_MODULES, granted, needed
from tests.unit.test_stack import cfn_lint

REGIONS = ("us-east-1", "us-west-2", "eu-west-1")


def _synth(folder: Path, name: str, regions: tuple[str, ...]) -> cdk.Stack:
    """The example job, its own VPC in each region, listing `regions`: synthesized into folder/out."""
    job = folder / f"{name}.toml"
    job.write_text((JOBS_DIR / "example.toml").read_text().replace('subnets = "parameter"', 'subnets = "create"')
                   .replace("[capacity]\n", f"[capacity]\nregions = {json.dumps(list(regions))}\n"))
    app = cdk.App(context={**CDK_JSON_CONTEXT, "job": str(job)}, outdir=str(folder / "out"), analytics_reporting=False)
    home = build_app(app)
    app.synth()
    return home


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("regions")
    _synth(folder, "moving", REGIONS)
    return folder / "out"


def _template(out: Path, stack: str) -> dict:
    return json.loads((out / f"{stack}.template.json").read_text())


def _of_kind(template: dict, kind: str) -> list[dict]:
    return [r.get("Properties", {}) for r in template["Resources"].values() if r["Type"] == kind]


STACKS = {"SpotTrainer-moving": "us-east-1", "SpotTrainer-moving-us-west-2": "us-west-2",
          "SpotTrainer-moving-eu-west-1": "eu-west-1"}


def test_each_region_gets_its_own_stack_deployed_there_home_last(out: Path) -> None:
    manifest = json.loads((out / "manifest.json").read_text())["artifacts"]
    assert {name: manifest[name]["environment"].rsplit("/", 1)[1] for name in STACKS} == STACKS
    # `cdk deploy SpotTrainer-moving` brings the regions it may move to up first
    assert set(manifest["SpotTrainer-moving"]["dependencies"]) >= {"SpotTrainer-moving-us-west-2",
                                                                   "SpotTrainer-moving-eu-west-1"}


def test_home_trains_and_holds_the_controller_the_others_stand_by_at_zero(out: Path) -> None:
    home, *away = (_template(out, name) for name in STACKS)
    (group,) = _of_kind(home, "AWS::AutoScaling::AutoScalingGroup")
    assert group["DesiredCapacity"] == {"Ref": "Nodes"}
    assert _of_kind(home, "AWS::Lambda::Function") and _of_kind(home, "AWS::CloudWatch::Dashboard")
    for template in away:
        (group,) = _of_kind(template, "AWS::AutoScaling::AutoScalingGroup")
        assert group["DesiredCapacity"] == "0" and group["MaxSize"] == {"Ref": "Nodes"}
        assert not _of_kind(template, "AWS::Lambda::Function") and not _of_kind(template, "AWS::CloudWatch::Dashboard")
        assert _of_kind(template, "AWS::Logs::LogGroup") and _of_kind(template, "AWS::IAM::Role")


def test_every_region_has_a_bucket_whose_name_any_stack_can_compute(out: Path) -> None:
    for name, region in STACKS.items():
        (bucket,) = _of_kind(_template(out, name), "AWS::S3::Bucket")
        assert bucket["BucketName"] == {"Fn::Join": ["", ["moving-", {"Ref": "AWS::AccountId"}, f"-{region}"]]}


def test_every_region_s_template_is_lint_and_nag_clean(out: Path) -> None:
    result = cfn_lint(*(out / f"{name}.template.json" for name in STACKS))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "validation-report.json").read_text())
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success", nag["violations"]


def test_a_job_of_one_listed_region_is_one_stack_there_named_as_ever(tmp_path: Path) -> None:
    stack = _synth(tmp_path, "pinned", ("eu-west-1",))
    assert (stack.stack_name, stack.region) == ("SpotTrainer-pinned", "eu-west-1")
    assert [path.name for path in (tmp_path / "out").glob("*.template.json")] == ["SpotTrainer-pinned.template.json"]


def test_home_s_controller_may_move_the_job_between_the_job_s_own_groups_and_nothing_else(out: Path) -> None:
    home = _template(out, "SpotTrainer-moving")
    (function,) = [f for f in _of_kind(home, "AWS::Lambda::Function") if f["Handler"] != "index.handler"]
    assert function["Handler"] == "spot_trainer.capacity.region_controller.handler"  # the runtime wheel's module
    assert function["Environment"]["Variables"]["REGIONS"] == ",".join(REGIONS)
    (role,) = [r for r in _of_kind(home, "AWS::IAM::Role") if "RegionsController" in json.dumps(r)]
    statements = role["Policies"][0]["PolicyDocument"]["Statement"]
    by_action = {json.dumps(s["Action"]): json.dumps(s["Resource"]) for s in statements}
    moving = by_action['["autoscaling:SetDesiredCapacity", "autoscaling:UpdateAutoScalingGroup"]']
    assert all(f"autoscaling:{region}:" in moving for region in REGIONS)
    assert moving.count("autoScalingGroupName/spot-trainer-moving") == len(REGIONS)
    # and what it reads
    calls = needed(REGIONS_MODULES | {"spot_trainer/capacity/market.py", "spot_trainer/capacity/watch.py"})
    assert calls and set(calls) <= granted(statements), f"the role lacks {set(calls) - granted(statements)}"
    # beyond its calls: Lambda's own log stream, and the listing that makes a missing latest.json a 404, not a 403
    assert granted(statements) - set(calls) <= {"logs:CreateLogStream", "logs:PutLogEvents", "s3:ListBucket"}
    writes = [s for s in statements if "s3:PutObject" in json.dumps(s["Action"])]
    assert writes and all("-us-east-1/moving/" in json.dumps(s["Resource"]) for s in writes)  # home's bucket only
    assert not any("s3:DeleteObject" in json.dumps(s["Action"]) or s["Action"] == "*" for s in statements)


def _instance_statements(template: dict) -> dict[str, dict]:
    (policy,) = [p for p in _of_kind(template, "AWS::IAM::Policy") if "JobCheckpoints" in json.dumps(p)]
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}


def test_every_region_s_instances_read_the_others_buckets_and_keep_the_lease_in_home_s(out: Path) -> None:
    home, away = _instance_statements(_template(out, "SpotTrainer-moving")), \
        _instance_statements(_template(out, "SpotTrainer-moving-us-west-2"))
    assert "HomeLease" not in home  # home's own bucket is its checkpoint bucket
    assert json.dumps(away["HomeLease"]["Resource"]).endswith('"-us-east-1/moving/lease.json"]]}')
    assert away["HomeLease"]["Action"] == "s3:PutObject"
    reads = json.dumps(away["OtherRegionsCheckpoints"]["Resource"])
    assert "-us-east-1/moving/*" in reads and "-eu-west-1/moving/*" in reads and "-us-west-2/" not in reads
    assert away["OtherRegionsCheckpoints"]["Action"] == "s3:GetObject"  # nothing of another region is written
    launch = _of_kind(_template(out, "SpotTrainer-moving-us-west-2"), "AWS::EC2::LaunchTemplate")[0]
    user_data = json.dumps(launch["LaunchTemplateData"]["UserData"])
    assert "SPOT_JOB_BUCKETS" in user_data and "us-east-1=moving-" in user_data
