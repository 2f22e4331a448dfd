"""What an instance says about itself for its cost record: type, AZ and market from IMDS, and its boot time."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcloud.fake_imds import FakeImds
from spot_trainer.agent.instance.imds import ImdsClient
from spot_trainer.agent.records.instance_record import InstanceFacts, instance_facts

T0 = 1_800_000_000.0


def test_facts_come_from_imds_and_the_launch_time_setting(tmp_path: Path) -> None:
    with FakeImds(instance_id="i-0cost", region="eu-west-1", instance_type="g6.xlarge", market="on-demand",
                  availability_zone="eu-west-1c") as imds:
        facts = instance_facts(ImdsClient(imds.url), {"SPOT_LAUNCHED_AT": f"{T0}"})
    assert facts == InstanceFacts("i-0cost", "g6.xlarge", "eu-west-1c", "on-demand", T0)


def test_without_the_setting_the_boot_time_is_now_minus_uptime(tmp_path: Path) -> None:
    uptime = tmp_path / "uptime"
    uptime.write_text("120.50 230.00\n")
    with FakeImds() as imds:
        facts = instance_facts(ImdsClient(imds.url), {}, uptime_file=uptime, clock=lambda: T0)
    assert (facts.launched_at, facts.market, facts.az, facts.instance_type) == (T0 - 120.5, "spot", "us-east-1a",
                                                                               "g5.xlarge")


def test_a_bad_launch_time_is_one_line(tmp_path: Path) -> None:
    with FakeImds() as imds:
        with pytest.raises(ValueError, match="SPOT_LAUNCHED_AT='soon' is not epoch seconds"):
            instance_facts(ImdsClient(imds.url), {"SPOT_LAUNCHED_AT": "soon"})
        with pytest.raises(ValueError, match="cannot read the boot time from"):
            instance_facts(ImdsClient(imds.url), {}, uptime_file=tmp_path / "none")


def test_the_stand_in_serves_only_the_markets_ec2_names() -> None:
    with pytest.raises(ValueError, match="market must be 'spot' or 'on-demand'"):
        FakeImds(market="reserved")
