"""When the local spot cloud takes spot capacity away: at a time into the run, or from the moment S3
holds a step (the same point of the job on a machine of any pace)."""

from __future__ import annotations

import pytest

from localcloud.interruptions import PlanError
from localcloud.outages import SpotOutage, outages_begun, parse_outage, spot_available


def test_an_outage_by_time_is_placed_from_the_start() -> None:
    outage = parse_outage("40:90")
    assert outage == SpotOutage(40.0, 90.0)
    assert outage.placed(elapsed=3.0, latest_step=None) == outage
    assert spot_available([outage], 39.9) and not spot_available([outage], 40.0) and spot_available([outage], 130.0)


def test_an_outage_by_step_waits_for_that_step_in_s3_then_begins_at_once() -> None:
    outage = parse_outage("step30:90")
    assert outage == SpotOutage(0.0, 90.0, after_step=30)
    assert outage.placed(elapsed=50.0, latest_step=None) is None
    assert outage.placed(elapsed=50.0, latest_step=29) is None
    placed = outage.placed(elapsed=71.5, latest_step=30)
    assert placed == SpotOutage(71.5, 90.0)
    assert outages_begun([placed], before=71.25, now=71.5) == [placed]
    assert not spot_available([placed], 100.0) and spot_available([placed], 161.5)


@pytest.mark.parametrize("text", ["40", "x:9", "40:0", "-1:9", "stepx:9", "step-3:9", "step:9"])
def test_a_bad_outage_is_one_line_naming_both_forms(text: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse_outage(text)
    assert str(caught.value) == (f"--spot-outage {text!r}: expected START:LENGTH in seconds, like 40:90, "
                                 "or stepN:LENGTH, like step30:90")
