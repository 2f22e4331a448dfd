"""The training node keeps the deadline: behind the straight line it switches its own group to
on-demand (an event and so a notification), back to spot once comfortably ahead; a job of unknown
size or a malformed deadline is named, never guessed at."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from localcloud import moto_app
from spot_trainer.agent.instance.config import AgentConfig, ConfigError, check_config, config_from_env
from spot_trainer.agent.records.notify import message_for
from spot_trainer.agent.records.status import JobStatus, StatusReporter
from spot_trainer.agent.records.telemetry import RunTelemetry
from spot_trainer.agent.watches.deadline_watch import DeadlineWatch, Pace, deadline_watch_for, plan_from
from spot_trainer.builtin_arguments import total_steps
from spot_trainer.capacity.market import group_market
from spot_trainer.capacity.policy import ON_DEMAND, SPOT
from spot_trainer.storage.steps.remote import RemoteStore

GROUP = "job-group"
HOUR = 3600.0


@pytest.fixture
def autoscaling(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    moto_app.install()
    credentials = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        ec2, asg = boto3.client("ec2"), boto3.client("autoscaling")
        template = ec2.create_launch_template(LaunchTemplateName="lt", LaunchTemplateData={"ImageId": "ami-12c6146b"})
        asg.create_auto_scaling_group(
            AutoScalingGroupName=GROUP, MinSize=0, MaxSize=1, DesiredCapacity=0, AvailabilityZones=["us-east-1a"],
            MixedInstancesPolicy={
                "LaunchTemplate": {"LaunchTemplateSpecification": {
                    "LaunchTemplateId": template["LaunchTemplate"]["LaunchTemplateId"]}},
                "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 0}})
        yield asg


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def watch_for(autoscaling: Any, clock: Clock, events: list[tuple[str, dict[str, Any]]]) -> DeadlineWatch:
    # 1000 steps due 10 h after the first start, 1 h kept in hand: the line asks 1000 steps per 9 h.
    plan = plan_from("10h", "1h", 1000, clock.now)
    return DeadlineWatch(plan, GROUP, autoscaling, lambda kind, **fields: events.append((kind, fields)),
                         lambda line: None, clock=clock, check_seconds=0.0)


def check_at(watch: DeadlineWatch, clock: Clock, hours: float, step: int) -> None:
    clock.now = watch.plan.first_start + hours * HOUR
    watch.check(step)


def slow_node(watch: DeadlineWatch, clock: Clock) -> None:
    """A node that trains 30 steps an hour: 1000 steps cannot be done by the deadline at that pace."""
    check_at(watch, clock, 1.0, 100)  # the step it restored
    check_at(watch, clock, 1.1, 101)  # its first own step
    check_at(watch, clock, 2.1, 131)


def test_spot_that_runs_is_kept_while_the_pace_makes_the_deadline(autoscaling: Any) -> None:
    clock, events = Clock(), []
    watch = watch_for(autoscaling, clock, events)
    for hours, step in ((3.0, 100), (3.1, 101), (3.6, 201)):  # 200 steps behind the line, at 18 s a step
        check_at(watch, clock, hours, step)
    assert group_market(autoscaling, GROUP) == SPOT and events == []


def test_the_safety_net_goes_on_demand_and_the_way_back_waits_a_margin(autoscaling: Any) -> None:
    clock, events = Clock(), []
    watch = watch_for(autoscaling, clock, events)
    slow_node(watch, clock)
    assert group_market(autoscaling, GROUP) == ON_DEMAND
    kind, fields = events[-1]
    assert (kind, fields["from"], fields["to"], fields["step"]) == ("market", SPOT, ON_DEMAND, 131)
    assert fields["reason"].startswith("the remaining 869 steps need")
    watch.pace = Pace()  # an on-demand replacement, at 18 s a step
    for hours, step in ((2.2, 131), (2.25, 132), (2.6, 200)):
        check_at(watch, clock, hours, step)  # within a margin of the line, but within a margin of the switch
    assert group_market(autoscaling, GROUP) == ON_DEMAND and len(events) == 1
    check_at(watch, clock, 3.2, 400)
    assert group_market(autoscaling, GROUP) == SPOT
    assert (events[-1][1]["from"], events[-1][1]["to"]) == (ON_DEMAND, SPOT)
    assert "back to spot" in events[-1][1]["reason"]


def test_a_group_the_agent_may_not_change_leaves_training_alone(autoscaling: Any) -> None:
    clock, events = Clock(), []
    watch = watch_for(autoscaling, clock, events)
    watch.group_name = "someone-elses-group"
    clock.now += 5 * HOUR
    watch.check(1)  # no exception: the failure is logged and training goes on
    assert events == []


def test_the_builtin_trainer_states_its_own_size_as_the_trainer_reads_it() -> None:
    assert total_steps("--model lm --steps 300 --synthetic") == 300
    assert total_steps("--model lm --steps=42 --synthetic") == 42
    assert total_steps("--model lm --synthetic") is None  # the trainer refuses it: no size to plan by
    assert total_steps("--model lm --steps abc --synthetic") is None
    assert total_steps("--model lm --steps 3 --synthetic '") is None


@pytest.mark.parametrize(("name", "value", "named"), [
    ("SPOT_DEADLINE", "next friday", "SPOT_DEADLINE: deadline 'next friday' is neither"),
    ("SPOT_DEADLINE_MARGIN", "1.5h", "SPOT_DEADLINE_MARGIN"),
    ("SPOT_TOTAL_STEPS", "-5", "SPOT_TOTAL_STEPS=-5 is out of range"),
])
def test_a_schedule_setting_the_agent_cannot_read_is_refused_at_start(
        tmp_path: Any, name: str, value: str, named: str) -> None:
    env = {"SPOT_JOB": "job", "SPOT_BUCKET": "bucket-1", "SPOT_COMMAND": "builtin",
           "SPOT_CHECKPOINT_DIR": str(tmp_path), name: value}
    with pytest.raises(ConfigError) as refused:
        check_config(config_from_env(env))
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_notifications_say_what_happened_in_one_short_message() -> None:
    subject, text = message_for("lm", "market", {"from": SPOT, "to": ON_DEMAND, "step": 130,
                                                 "reason": "behind the straight line to the deadline by 192 steps"})
    assert subject == "Spot Trainer lm: now on-demand"
    assert text == ("Job lm switched from spot to on-demand at step 130: "
                    "behind the straight line to the deadline by 192 steps.")
    subject, text = message_for("lm", "interruption", {"instance": "i-1", "reason": "spot interruption notice",
                                                       "step": 80})
    assert subject == "Spot Trainer lm: interrupted" and "checkpoint step 80 is safe in S3" in text
    _, text = message_for("lm", "interruption", {"instance": "i-1", "reason": "spot interruption notice",
                                                 "step": None})
    assert "None" not in text and "saved no checkpoint yet, so a replacement starts from the beginning" in text
    assert message_for("lm", "checkpoint", {"step": 80}) is None  # not every event is news


def test_the_pace_ignores_start_up_and_needs_enough_steps() -> None:
    pace = Pace()
    assert pace.seconds_per_step(0.0, 220) is None  # the step restored: nothing trained here yet
    assert pace.seconds_per_step(5.0, 220) is None  # importing, restoring
    assert pace.seconds_per_step(9.0, 221) is None  # the first step of ours: the clock starts here
    assert pace.seconds_per_step(10.0, 225) is None  # 4 steps say little
    assert pace.seconds_per_step(12.0, 231) == pytest.approx(0.3)


def test_a_deadline_the_agent_cannot_judge_is_said_where_the_user_looks(autoscaling: Any) -> None:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="ckpt")
    telemetry = RunTelemetry(store=RemoteStore(s3, "ckpt", "own", instance="i-1"), cloud=None)
    telemetry.reporter = StatusReporter(JobStatus("own"), publish=lambda record: None)
    config = AgentConfig(job="own", bucket="ckpt", command="python train.py", deadline="36h", asg_name=GROUP)
    assert deadline_watch_for(config, autoscaling, telemetry, first_start=0.0) is None
    warning = telemetry.reporter.status.warning
    assert warning.startswith("the deadline is not kept: the job's size is unknown: set total_steps")
    assert [event["message"] for event in telemetry.store.events() if event["kind"] == "warning"] == [warning]
    builtin = AgentConfig(job="own", bucket="ckpt", command="builtin", train_args="--model lm --steps 500 --synthetic",
                          deadline="36h", asg_name=GROUP)
    watch = deadline_watch_for(builtin, autoscaling, telemetry, first_start=0.0)
    assert watch is not None and watch.plan.total_steps == 500 and watch.plan.deadline_at == 36 * HOUR
