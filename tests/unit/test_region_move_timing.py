"""The regions simulation's times from capacity lost in home to the first step in another region, at AWS's
times: the 2-minute notice, a failed launch a minute, the launch, the bootstrap and the restore."""

from __future__ import annotations

from benchmarks.region_moves import simulate
from benchmarks.region_policies import placement_score
from benchmarks.region_timing import MoveTime, move_times_summary
from benchmarks.region_world import REGIONS, Job, Settings

HOME, CHEAP, LOW = REGIONS
LOST_AT = 60  # home's spot capacity goes at this minute, and stays out
MINUTES = 2000


def job(checkpoint_gb: float) -> Job:
    """Home loses its capacity at LOST_AT; us-west-2 has capacity and scores 9, eu-west-1 scores 3."""
    home = bytes(minute < LOST_AT for minute in range(MINUTES))
    always = bytes([1] * MINUTES)
    return Job(compute=300, deadline=MINUTES, on_demand_per_minute=1.0, checkpoint_gb=checkpoint_gb,
               spot_share=dict.fromkeys(REGIONS, 0.3), available={HOME: home, CHEAP: always, LOW: always},
               scores={HOME: bytes(9 if up else 1 for up in home), CHEAP: bytes([9] * MINUTES),
                       LOW: bytes([3] * MINUTES)},
               announced=bytes([1] * MINUTES))


def the_move(checkpoint_gb: float, settings: Settings) -> MoveTime:
    played = job(checkpoint_gb)
    outcome = simulate(played, placement_score(played, settings), settings, HOME)
    assert len(outcome.move_times) == 1, outcome.move_times
    assert outcome.cross_region_gb == checkpoint_gb  # the notice saved the step; it crossed once
    return outcome.move_times[0]


def test_three_failed_launches_move_the_job_and_its_first_step_follows_boot_and_restore() -> None:
    move = the_move(90.0, Settings())  # 90 GB restores in 3 minutes at 500 MB/s
    # notice at 60, reclaimed at 62, failed launches at 62, 63 and 64, moved at 65; then a 2-minute launch,
    # a 1-minute bootstrap and a 3-minute restore: the first step at 71
    assert (move.lost_at, move.due_at, move.moved_at, move.launched_at, move.first_step_at) == (60, 65, 65, 65, 71)
    assert move.by_failures and "moving to us-west-2" in move.reason


def test_region_wait_counts_from_the_reclaim_so_the_notice_adds_to_it() -> None:
    # a group reporting a failed launch every 10 minutes: region_wait (15 min) moves the job first
    move = the_move(90.0, Settings(launch_retry_minutes=10))
    assert not move.by_failures and "region_wait 15m" in move.reason
    assert (move.due_at, move.moved_at, move.first_step_at) == (62 + 15, 77, 83)
    assert move.first_step_at - move.lost_at == 23  # over region_wait + 3 min by the notice and the restore


def test_the_summary_gives_each_move_against_the_bound() -> None:
    small, large = the_move(90.0, Settings()), the_move(390.0, Settings())  # 3 and 13 minutes of restore
    summary = move_times_summary([small, large], bound=18)
    assert summary["all"]["count"] == 2 and summary["all"]["max_minutes"] == 5 + 3 + 13
    assert summary["all"]["within_bound_share"] == 0.5
    assert summary["when_due_and_target_launched_at_once"]["parts_mean_minutes"]["lost_to_due"] == 5
