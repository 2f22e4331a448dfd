"""The cost lines of the local report: the status command's computation, and what each figure means."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import boto3
from moto import mock_aws

from localcloud.cloud import Deployment
from localcloud.instance import Instance
from localcloud.report import Report, flat_prices, run_cost, savings_phrase
from spot_trainer.storage.steps.remote import RemoteStore


def test_savings_read_as_a_percentage() -> None:
    assert savings_phrase(0.655, 0.7) == "65.5% saved"
    assert savings_phrase(0.0, 0.7) == "0.0% saved"


def test_a_run_that_cost_more_than_on_demand_says_how_much_and_why() -> None:
    phrase = savings_phrase(-2.78, 0.7)
    assert phrase.startswith("3.78x the on-demand run: ") and "70% discount" in phrase
    assert not re.search(r"-\d", phrase) and "saved" not in phrase


T0 = 1_800_000_000.0


class Cloud:
    aws_env = {"AWS_DEFAULT_REGION": "us-east-1"}

    def client(self, service: str, region: str | None = None) -> object:
        return boto3.client(service, region_name=region or "us-east-1")


def test_the_local_cost_is_the_status_computation_over_the_records_and_the_player_s_view() -> None:
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="local")
        store = RemoteStore(Cloud().client("s3"), "local", "demo")
        store.put_json("instances/i-1.json", {"instance": "i-1", "type": "g5.xlarge", "az": "us-east-1a",
                                              "market": "spot", "launched_at": T0, "last_seen": T0 + 90,
                                              "stopped_at": None, "step": 100})
        store.put_json("events/1-start.json", {"kind": "start", "instance": "i-1", "epoch": T0 + 10})
        store.put_json("events/2-start.json", {"kind": "start", "instance": "i-2", "epoch": T0 + 130})
        store.put_json("events/3-resume.json", {"kind": "resume", "instance": "i-2", "epoch": T0 + 131, "step": 80})
        store.put_json("events/4-done.json", {"kind": "done", "instance": "i-2", "epoch": T0 + 200, "step": 300})
        store.put_json("instances/i-2.json", {"instance": "i-2", "type": "g5.xlarge", "az": "us-east-1b",
                                              "market": "on-demand", "launched_at": T0 + 120,
                                              "last_seen": T0 + 205, "stopped_at": T0 + 205})
        # i-1 lost power after its last beat; i-2 is on demand; i-3 died booting and wrote no record.
        instances = {iid: Instance(iid, "g5.xlarge", Path("/nonexistent"), {}, market=market,
                                   launched_at=T0 + start, ended_at=T0 + end)
                     for iid, market, start, end in (("i-1", "spot", 0, 95), ("i-2", "on-demand", 120, 210),
                                                     ("i-3", "spot", 120, 150))}
        deployment = Deployment(job="demo", stack="SpotTrainer-demo", bucket="local", group="g", app_dir=Path("."))
        player = SimpleNamespace(cloud=Cloud(), deployment=deployment,
                                 instances=instances, ended_at=T0 + 300)
        cost, unrecorded = run_cost(player, flat_prices(0.7))  # type: ignore[arg-type]
    assert unrecorded == ["i-3"]
    hours = {c.instance: round(c.hours * 3600) for c in cost.instances}
    assert hours == {"i-1": 90, "i-2": 85, "i-3": 30}, "records first (no minimum locally), then the player's view"
    assert round(cost.cost_usd, 9) == round((90 + 30) / 3600 * 1.006 * 0.3 + 85 / 3600 * 1.006, 9)
    assert (cost.steps_computed, cost.redone_steps) == (320, 20)
    assert cost.price_source == "flat trace: 30% of the on-demand price"


def test_the_two_comparisons_are_told_apart() -> None:
    report = Report(
        job="demo", state="DONE", reason="", steps=300, total_steps=300, final_checkpoint_step=300,
        interruptions=2, announced=1, hard_kills=1, completed_steps_lost=20, steps_computed=320,
        progress_from="steps", checkpoint_stall_seconds=0.5, training_seconds=100.0, checkpoint_overhead=0.005,
        wall_seconds=200.0, instances=3, instance_type="g5.xlarge", instance_seconds=205.0, boot_seconds=20.0,
        on_demand_equivalent_seconds=120.0, useful_work_fraction=0.585, spot_discount=0.7,
        on_demand_usd_per_hour=1.006, spot_cost_usd=0.0417, on_demand_cost_usd=0.0335, savings=-0.2448,
        on_demand_same_hours_usd=0.0573, savings_same_hours=0.2724, redone_steps=20, redone_cost_usd=0.0026,
        price_source="flat trace: 30% of the on-demand price", instances_without_record=1)
    lines = report.text().splitlines()
    [same_hours] = [line for line in lines if line.startswith("  cost (g5.xlarge)")]
    [uninterrupted] = [line for line in lines if line.startswith("  vs on-demand run")]
    assert "for 0.0569 instance-hours (flat trace: 30% of the on-demand price)" in same_hours
    assert same_hours.endswith("the same hours on demand $0.05730: 27.2% less")
    assert "$0.03350 for the job once, uninterrupted, on demand: 1.24x the on-demand run" in uninterrupted
    assert "than the 27% discount saves" in uninterrupted, "the discount this run got, not the nominal one"
    assert any(line.startswith("  redone work cost       $0.00260 for 20 steps") for line in lines)
    assert any("1 instances wrote no record (their agent never started)" in line for line in lines)
    failed = replace(report, state="FAILED", agents_without_record=1)
    notes = [line for line in failed.text().splitlines() if line.startswith("  note")]
    assert len(notes) == 1 and "agents started and ended before writing their record" in notes[0], notes
