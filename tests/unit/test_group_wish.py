"""`status`'s line about the group offers `resume` only to a job that can go on: never to a finished one, whose
own end took the group to zero."""

from __future__ import annotations

import pytest

from spot_trainer.ops.group_state import GroupState
from spot_trainer.ops.pause import wish_line

AT_ZERO = GroupState(name="spot-trainer-cnn", desired=0, most=1, running=0)


def test_a_paused_job_is_offered_resume() -> None:
    assert wish_line(AT_ZERO, "cnn", "INTERRUPTED") == (
        "paused: the group wants 0 instances (`spot-trainer resume --job cnn` goes on)")


@pytest.mark.parametrize("state", ["DONE", "FAILED"])
def test_a_finished_job_is_offered_nothing(state: str) -> None:
    line = wish_line(AT_ZERO, "cnn", state)
    assert line == f"group: wants 0 instances (the job is {state})" and "resume" not in line


def test_a_job_stopped_at_its_budget_is_told_what_goes_first() -> None:
    assert "raise BudgetUSD, then `spot-trainer resume --job cnn` goes on" in wish_line(AT_ZERO, "cnn",
                                                                                       "STOPPED_BY_BUDGET")


def test_a_running_group_says_what_it_wants() -> None:
    running = GroupState(name="spot-trainer-cnn", desired=2, most=2, running=1)
    assert wish_line(running, "cnn", "TRAINING") == "group: wants 2 of at most 2 instance(s), 1 in it"
