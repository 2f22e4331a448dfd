"""When the agent takes a command for hung: only once it knows the command's rhythm, and never sooner
than the stall limit or twice the longest silence between two progress signals."""

from __future__ import annotations

from spot_trainer.agent.watches.hang_watch import HangWatch

MINUTE = 60.0


def test_a_job_that_shows_no_progress_at_all_is_never_judged() -> None:
    watch = HangWatch(stall_seconds=30 * MINUTE)
    watch.saw(None, 0.0)
    assert not watch.hung(10 * 3600.0)
    watch.saw(0, 1.0)  # the step it resumed from: one signal, no rhythm yet
    assert not watch.hung(10 * 3600.0)


def test_steps_every_second_then_silence_is_a_hang_at_the_stall_limit() -> None:
    watch = HangWatch(stall_seconds=30 * MINUTE)
    for second in range(1, 21):
        watch.saw(second, float(second))
    assert not watch.hung(20 + 30 * MINUTE - 1)
    assert watch.hung(20 + 30 * MINUTE)
    assert "at step 20" in watch.line(20 + 30 * MINUTE)


def test_a_job_that_saves_once_an_hour_and_prints_nothing_is_not_taken_for_hung_after_30_minutes() -> None:
    watch = HangWatch(stall_seconds=30 * MINUTE)
    for hour in range(1, 4):
        watch.saw(hour * 1000, hour * 3600.0)
    assert not watch.hung(3 * 3600.0 + 90 * MINUTE)  # an hour and a half since its last save
    assert watch.hung(3 * 3600.0 + 2 * 3600.0)  # twice its longest silence


def test_zero_minutes_turns_it_off() -> None:
    watch = HangWatch(stall_seconds=0)
    for second in range(1, 21):
        watch.saw(second, float(second))
    assert not watch.hung(10 * 3600.0)


def test_a_second_hang_at_the_same_step_ends_the_job_but_one_after_progress_is_answered_again() -> None:
    watch = HangWatch(stall_seconds=10)
    for second in range(1, 21):
        watch.saw(second, float(second))
    assert watch.hung(40.0) and not watch.again_at_the_same_step()
    watch.restart(41.0)
    assert not watch.hung(45.0)
    assert watch.hung(52.0), "a run that shows nothing after its restart is judged on the rhythm learned"
    watch.saw(20, 42.0)
    assert watch.again_at_the_same_step()
    later = HangWatch(stall_seconds=10)
    for second in range(1, 21):
        later.saw(second, float(second))
    assert later.hung(40.0) and not later.again_at_the_same_step()
    later.restart(41.0)
    for second in range(42, 62):
        later.saw(second - 22, float(second))  # resumed at 20, went on to 39
    assert later.hung(80.0) and not later.again_at_the_same_step()


def test_a_command_started_again_that_redoes_steps_below_the_last_one_shown_is_making_progress() -> None:
    watch = HangWatch(stall_seconds=10)
    for second in range(1, 51):
        watch.saw(second, float(second))  # step lines up to 50; its last checkpoint was 40
    watch.restart(60.0)
    watch.saw(50, 61.0)  # the step the status still shows
    for second in range(62, 80):
        watch.saw(second - 21, float(second))  # 41, 42, … redone from checkpoint 40
    assert not watch.hung(80.0)
