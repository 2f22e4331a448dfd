"""A spot instance goes at its notice's own `time`, two minutes after the notice, whatever the agent does:
the command's time to save is what is left once the upload of its checkpoint is set aside."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spot_trainer.agent.watches.notice_deadline import AFTER_UPLOAD_SECONDS, UPLOAD_SAFETY, reclaim_time, stop_budget

SEEN = datetime(2026, 11, 26, 6, 0, 0, tzinfo=UTC).timestamp()


def test_the_notice_names_the_reclaim_time() -> None:
    assert reclaim_time({"action": "terminate", "time": "2026-11-26T06:01:50Z"}, SEEN) == SEEN + 110


@pytest.mark.parametrize("action", [None, {}, {"action": "terminate"}, {"time": "soon"}, {"time": 7}])
def test_a_notice_without_a_usable_time_is_two_minutes_from_when_it_was_seen(action: dict | None) -> None:
    assert reclaim_time(action, SEEN) == SEEN + 120


def test_a_time_beyond_two_minutes_is_not_believed() -> None:
    assert reclaim_time({"time": "2026-11-26T06:30:00Z"}, SEEN) == SEEN + 120


def test_the_default_grace_is_cut_to_what_the_upload_leaves() -> None:
    budget = stop_budget(110, reclaim_at=SEEN + 120, now=SEEN + 5, last_upload_seconds=20)
    assert budget.seconds == pytest.approx(115 - 20 * UPLOAD_SAFETY - AFTER_UPLOAD_SECONDS)
    assert budget.fits


def test_a_long_grace_never_outlasts_the_notice() -> None:
    budget = stop_budget(7200, reclaim_at=SEEN + 120, now=SEEN, last_upload_seconds=None)
    assert budget.seconds == pytest.approx(120 - AFTER_UPLOAD_SECONDS) and budget.fits


def test_a_short_grace_is_kept() -> None:
    assert stop_budget(30, reclaim_at=SEEN + 120, now=SEEN, last_upload_seconds=10).seconds == 30


def test_an_upload_that_cannot_fit_is_said_and_the_command_still_gets_half_of_what_is_left() -> None:
    budget = stop_budget(110, reclaim_at=SEEN + 120, now=SEEN + 20, last_upload_seconds=90)
    assert not budget.fits and budget.seconds == pytest.approx(50)


def test_a_notice_seen_after_its_time_leaves_nothing() -> None:
    assert stop_budget(110, reclaim_at=SEEN, now=SEEN + 3, last_upload_seconds=1).seconds == 0
