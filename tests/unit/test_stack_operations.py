"""The job's operations in the template: its topic and who may publish, the stall alarm, the dashboard,
and the capacity watch that exists only when a deadline or a longest wait for spot is given."""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path
from typing import Any

import pytest

from stacks.instance.user_data import script_body
from stacks.job.spec import JOBS_DIR, JobSpecError
from stacks.resources.capacity_watch import WATCH_SOURCE, watch_code
from tests.unit.stack_support import Synthesized, synth


@pytest.fixture(scope="module")
def example(synthesized: dict[str, Synthesized]) -> Synthesized:
    return synthesized["example"]


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The example with an e-mail, a deadline, a longest wait for spot and no stall alarm."""
    folder = tmp_path_factory.mktemp("scheduled")
    job = folder / "scheduled.toml"
    job.write_text((JOBS_DIR / "example.toml").read_text() + '\n[notify]\nemail = "ml-team@example.com"\n'
                   'stall_minutes = 0\n\n[schedule]\ndeadline = "36h"\nmax_spot_wait = "2h"\nmargin = "45m"\n')
    return synth(str(job), folder / "out")


def only(synth: Synthesized, kind: str) -> tuple[str, dict[str, Any]]:
    (found,) = synth.resources(kind).items()
    return found


def condition(synth: Synthesized, logical_id: str) -> Any:
    return synth.raw["Conditions"][synth.condition_of(logical_id)]


def not_empty(parameter: str) -> dict[str, Any]:
    return {"Fn::Not": [{"Fn::Equals": [{"Ref": parameter}, ""]}]}


def test_the_topic_takes_ssl_only_and_this_accounts_alarms(example: Synthesized) -> None:
    topic, _ = only(example, "AWS::SNS::Topic")
    _, policy = only(example, "AWS::SNS::TopicPolicy")
    assert policy["Properties"]["Topics"] == [{"Ref": topic}]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    deny = [s for s in statements if s["Effect"] == "Deny"]
    assert deny == [{"Sid": "AllowPublishThroughSSLOnly", "Effect": "Deny", "Principal": "*",
                     "Action": "sns:Publish", "Resource": {"Ref": topic},
                     "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]
    # A topic policy replaces SNS's default one: without this the alarm could not publish.
    (alarms,) = [s for s in statements if s["Effect"] == "Allow"]
    assert alarms["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and alarms["Action"] == "sns:Publish"
    assert ":alarm:*" in json.dumps(alarms["Condition"]["ArnLike"]["aws:SourceArn"])
    assert example.raw["Outputs"]["NotificationTopic"]["Value"] == {"Ref": topic}


def test_an_email_subscribes_only_when_given(example: Synthesized, scheduled: Synthesized) -> None:
    for synthesized, default in ((example, ""), (scheduled, "ml-team@example.com")):
        topic, _ = only(synthesized, "AWS::SNS::Topic")
        logical_id, subscription = only(synthesized, "AWS::SNS::Subscription")
        assert subscription["Properties"] == {"Protocol": "email", "TopicArn": {"Ref": topic},
                                              "Endpoint": {"Ref": "NotifyEmail"}}
        assert condition(synthesized, logical_id) == not_empty("NotifyEmail")
        assert synthesized.raw["Parameters"]["NotifyEmail"]["Default"] == default


def test_the_stall_alarm_counts_minutes_without_a_step_while_the_group_has_an_instance(
    example: Synthesized, scheduled: Synthesized
) -> None:
    logical_id, alarm = only(example, "AWS::CloudWatch::Alarm")
    assert condition(example, logical_id) == {"Fn::Not": [{"Fn::Equals": [{"Ref": "StallAlarmMinutes"}, "0"]}]}
    assert example.raw["Parameters"]["StallAlarmMinutes"]["Default"] == "30"
    assert scheduled.raw["Parameters"]["StallAlarmMinutes"]["Default"] == "0"  # stall_minutes = 0: none
    props = alarm["Properties"]
    topic, _ = only(example, "AWS::SNS::Topic")
    assert props["AlarmActions"] == [{"Ref": topic}] and "OKActions" not in props
    assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == {"Ref": "StallAlarmMinutes"}
    assert (props["ComparisonOperator"], props["Threshold"], props["TreatMissingData"]) == (
        "GreaterThanOrEqualToThreshold", 1, "notBreaching")
    queries = {q["Id"]: q for q in props["Metrics"]}
    steps, live = queries["steps"]["MetricStat"], queries["live"]["MetricStat"]
    assert (steps["Metric"]["Namespace"], steps["Metric"]["MetricName"], steps["Stat"], steps["Period"]) == (
        "SpotTrainer", "Step", "SampleCount", 60)
    assert steps["Metric"]["Dimensions"] == [{"Name": "Job", "Value": "example"}]
    assert live["Metric"]["Dimensions"] == [{"Name": "AutoScalingGroupName", "Value": "spot-trainer-example"}]
    assert queries["stalled"]["ReturnData"] is True
    assert [q["Id"] for q in props["Metrics"] if q["ReturnData"]] == ["stalled"]


@pytest.mark.parametrize(("live", "steps", "stalled"), [(1, 0, 1), (1, None, 1), (1, 3, 0), (0, 0, 0),
                                                         (None, None, 0), (2, 1, 0)])
def test_the_alarm_expression_on_one_minute(example: Synthesized, live: float | None, steps: float | None,
                                            stalled: int) -> None:
    """CloudWatch's metric math, read for one period: FILL gives a missing sample the value 0."""
    (expression,) = [q["Expression"] for q in only(example, "AWS::CloudWatch::Alarm")[1]["Properties"]["Metrics"]
                     if "Expression" in q]
    python = re.sub(r"FILL\((\w+), 0\)", r"(\1 or 0)", expression).replace("AND", "and").replace("IF(", "_if(")
    assert eval(python, {"_if": lambda c, a, b: a if c else b}, {"live": live, "steps": steps}) == stalled


def test_the_group_reports_its_instances_in_service_every_minute(example: Synthesized) -> None:
    group = example.one("AWS::AutoScaling::AutoScalingGroup")
    assert group["MetricsCollection"] == [{"Granularity": "1Minute", "Metrics": ["GroupInServiceInstances"]}]


def test_the_dashboard_shows_progress_instances_interruptions_and_spend(example: Synthesized) -> None:
    _, dashboard = only(example, "AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "spot-trainer-example"
    body = json.loads(dashboard["Properties"]["DashboardBody"]["Fn::Sub"])
    widgets = {w["properties"]["title"]: w["properties"] for w in body["widgets"]}
    assert set(widgets) == {"Step", "Loss", "Samples per second", "Instances in service", "Interruptions",
                            "Spend (USD, over the range shown)"}
    assert all(w["region"] == "${AWS::Region}" for w in widgets.values())
    assert widgets["Step"]["metrics"] == [["SpotTrainer", "Step", "Job", "example", {"stat": "Maximum"}]]
    assert widgets["Interruptions"]["metrics"][0][4] == {"stat": "Sum"}
    assert widgets["Instances in service"]["metrics"][0][:4] == [
        "AWS/AutoScaling", "GroupInServiceInstances", "AutoScalingGroupName", "spot-trainer-example"]
    running, spend = widgets["Spend (USD, over the range shown)"]["metrics"]
    assert running == [{"expression": "RUNNING_SUM(spend)", "label": "USD"}]
    assert spend[:4] == ["SpotTrainer", "SpendUSD", "Job", "example"] and spend[4]["id"] == "spend"


def instance_statements(synth: Synthesized) -> dict[str, dict[str, Any]]:
    policies = [p["Properties"] for p in synth.resources("AWS::IAM::Policy").values() if "Condition" not in p]
    (own,) = [p for p in policies if "TrainerRole" in json.dumps(p["Roles"])]
    return {s["Sid"]: s for s in own["PolicyDocument"]["Statement"]}


def actions(statement: dict[str, Any]) -> list[str]:
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


def test_the_instances_publish_to_the_topic_and_update_their_own_group_only(example: Synthesized) -> None:
    statements = instance_statements(example)
    topic, _ = only(example, "AWS::SNS::Topic")
    publishing = [s for s in statements.values() if "sns:Publish" in actions(s)]
    assert publishing == [{"Sid": "JobNotifications", "Effect": "Allow", "Action": "sns:Publish",
                           "Resource": {"Ref": topic}}]
    updating = [s for s in statements.values() if "autoscaling:UpdateAutoScalingGroup" in actions(s)]
    assert [s["Sid"] for s in updating] == ["OwnGroup"]
    assert json.dumps(updating[0]["Resource"]).endswith(':autoScalingGroupName/spot-trainer-example"]]}')
    (prices,) = [s for s in statements.values() if "ec2:DescribeSpotPriceHistory" in actions(s)]
    assert prices["Resource"] == "*" and not [a for a in actions(prices) if not a.split(":")[1].startswith("Describe")]


def test_without_a_deadline_or_a_wait_for_spot_there_is_no_capacity_watch(example: Synthesized) -> None:
    watched = {"AWS::Lambda::Function", "AWS::Events::Rule", "AWS::Lambda::Permission"}
    for kind in watched:
        (logical_id,) = example.resources(kind)
        assert condition(example, logical_id) == {"Fn::Or": [not_empty("MaxSpotWait"), not_empty("Deadline")]}
    defaults = {name: example.raw["Parameters"][name]["Default"] for name in ("MaxSpotWait", "Deadline")}
    assert defaults == {"MaxSpotWait": "", "Deadline": ""}


def test_the_capacity_watch_runs_every_minute_with_the_jobs_settings(scheduled: Synthesized) -> None:
    function_id, function = only(scheduled, "AWS::Lambda::Function")
    props = function["Properties"]
    assert (props["Runtime"], props["Handler"]) == ("python3.14", "index.handler")
    assert set(props["Environment"]["Variables"]) == {"GROUP_NAME", "BUCKET", "JOB", "MAX_SPOT_WAIT", "DEADLINE",
                                                      "DEADLINE_MARGIN", "TOPIC_ARN"}
    variables = props["Environment"]["Variables"]
    assert (variables["GROUP_NAME"], variables["JOB"]) == ("spot-trainer-scheduled", "scheduled")
    assert (variables["MAX_SPOT_WAIT"], variables["DEADLINE"], variables["DEADLINE_MARGIN"]) == (
        {"Ref": "MaxSpotWait"}, {"Ref": "Deadline"}, {"Ref": "DeadlineMargin"})
    assert props["LoggingConfig"] == {"LogGroup": "/spot-trainer/scheduled"}  # beside the instances' logs
    defaults = {name: scheduled.raw["Parameters"][name]["Default"] for name in ("Deadline", "MaxSpotWait",
                                                                               "DeadlineMargin", "TotalSteps")}
    assert defaults == {"Deadline": "36h", "MaxSpotWait": "2h", "DeadlineMargin": "45m", "TotalSteps": ""}
    _, rule = only(scheduled, "AWS::Events::Rule")
    assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    _, permission = only(scheduled, "AWS::Lambda::Permission")
    assert permission["Properties"]["Principal"] == "events.amazonaws.com"
    assert permission["Properties"]["FunctionName"] == {"Ref": function_id}


def test_the_inline_code_is_watch_py(scheduled: Synthesized) -> None:
    code = only(scheduled, "AWS::Lambda::Function")[1]["Properties"]["Code"]["ZipFile"]
    (packed,) = re.findall(r"b64decode\('([A-Za-z0-9+/=]+)'\)", code)
    assert zlib.decompress(base64.b64decode(packed)) == WATCH_SOURCE.read_bytes()
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # what Lambda does with index.py: the handler is defined at module level
    assert callable(namespace["handler"])


def test_watch_code_over_the_inline_limit_is_one_line(tmp_path: Path) -> None:
    big = tmp_path / "watch.py"
    big.write_text("#" * 4097)
    with pytest.raises(JobSpecError) as caught:
        watch_code(big)
    assert str(caught.value) == f"{big}: 4097 bytes, over the 4096 CloudFormation takes as a Lambda's inline code"


def test_the_watch_role_reads_the_job_and_switches_its_own_group_only(scheduled: Synthesized) -> None:
    roles = {k: r for k, r in scheduled.resources("AWS::IAM::Role").items()
             if "lambda.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])}
    ((role_id, role),) = roles.items()
    assert condition(scheduled, role_id) == {"Fn::Or": [not_empty("MaxSpotWait"), not_empty("Deadline")]}
    assert "ManagedPolicyArns" not in role["Properties"]
    (policy,) = role["Properties"]["Policies"]
    by_action = {a: s for s in policy["PolicyDocument"]["Statement"] for a in actions(s)}
    assert set(by_action) == {"autoscaling:DescribeAutoScalingGroups", "autoscaling:UpdateAutoScalingGroup",
                              "s3:GetObject", "s3:ListBucket", "s3:PutObject", "sns:Publish",
                              "logs:CreateLogStream", "logs:PutLogEvents"}
    assert by_action["autoscaling:DescribeAutoScalingGroups"]["Resource"] == "*"
    assert json.dumps(by_action["autoscaling:UpdateAutoScalingGroup"]["Resource"]).endswith(
        'autoScalingGroupName/spot-trainer-scheduled"]]}')
    assert json.dumps(by_action["s3:GetObject"]["Resource"]).endswith('"/scheduled/*"]]}')
    assert json.dumps(by_action["s3:PutObject"]["Resource"]).endswith('"/scheduled/events/*"]]}')
    assert by_action["s3:ListBucket"]["Condition"] == {"StringLike": {"s3:prefix": ["scheduled/*"]}}
    topic, _ = only(scheduled, "AWS::SNS::Topic")
    assert by_action["sns:Publish"]["Resource"] == {"Ref": topic}
    (log_group,) = scheduled.resources("AWS::Logs::LogGroup")  # the job's own
    assert by_action["logs:PutLogEvents"]["Resource"] == {"Fn::GetAtt": [log_group, "Arn"]}  # ends in ":*"


def test_the_user_data_body_is_the_bootstrap_script_compressed(example: Synthesized) -> None:
    parts = example.one("AWS::EC2::LaunchTemplate")["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
    (packed,) = re.findall(r"printf %s '([A-Za-z0-9+/=]{1000,})' \| base64 -d \| gzip -dc", parts[-1])
    assert zlib.decompress(base64.b64decode(packed), wbits=31).decode() == script_body("v2")
