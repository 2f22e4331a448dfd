"""Steps computed more than once, from the job's events: across replacements, fresh starts and worlds."""

from __future__ import annotations

from typing import Any

from spot_trainer.costs.instance_records import InstanceLife
from spot_trainer.costs.redone_work import Work, training_stretches, work_done


def event(kind: str, instance: str, at: float, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "instance": instance, "epoch": at, **fields}


def life(instance: str, seen: float, step: int | None) -> InstanceLife:
    return InstanceLife(instance, "g5.xlarge", "us-east-1a", "spot", 0.0, seen, None, step=step)


def test_a_resume_below_a_reached_step_redoes_only_what_was_computed_twice() -> None:
    # 0 → 100 (killed, checkpoint 80); 80 → 90 (killed, checkpoint still 80); 80 → 200.
    events = [event("start", "i-1", 1), event("checkpoint", "i-1", 2, step=80), event("start", "i-2", 10),
              event("resume", "i-2", 11, step=80), event("start", "i-3", 20), event("resume", "i-3", 21, step=80),
              event("done", "i-3", 30, step=200)]
    lives = [life("i-1", 5, 100), life("i-2", 15, 90)]
    work = work_done(training_stretches(events, lives))
    assert (work.computed, work.redone) == (100 + 10 + 120, 30)


def test_an_announced_interruption_redoes_nothing() -> None:
    events = [event("start", "i-1", 1), event("interruption", "i-1", 5, step=100),
              event("start", "i-2", 10), event("resume", "i-2", 11, step=100), event("done", "i-2", 20, step=300)]
    assert work_done(training_stretches(events)) == Work(computed=300, redone=0)


def test_a_fresh_start_after_a_loss_before_any_checkpoint_redoes_everything_the_first_ran() -> None:
    events = [event("start", "i-1", 1), event("start", "i-2", 10), event("done", "i-2", 20, step=50)]
    work = work_done(training_stretches(events, [life("i-1", 5, 30)]))
    assert (work.computed, work.redone) == (80, 30)


def test_the_nodes_of_one_world_count_once() -> None:
    # Two nodes train steps 0 → 100 together and stop at 100 on a notice; two new nodes go on to 150.
    events = [event("start", "i-1", 1), event("start", "i-2", 1.5), event("checkpoint", "i-1", 5, step=60),
              event("interruption", "i-1", 8, step=100), event("interruption", "i-2", 8.2, step=100),
              event("start", "i-3", 20), event("start", "i-4", 20.5), event("resume", "i-3", 21, step=100),
              event("resume", "i-4", 21.2, step=100), event("done", "i-3", 40, step=150),
              event("done", "i-4", 40.5, step=150)]
    work = work_done(training_stretches(events))
    assert (work.computed, work.redone) == (150, 0)


def test_the_record_of_an_old_holder_written_after_the_next_start_does_not_join_the_stretches() -> None:
    # The old agent writes its stopped record after the new one took the lease and started.
    events = [event("start", "i-1", 1), event("interruption", "i-1", 5, step=100),
              event("start", "i-2", 6), event("resume", "i-2", 7, step=100), event("done", "i-2", 20, step=200)]
    work = work_done(training_stretches(events, [life("i-1", 6.5, 100)]))
    assert (work.computed, work.redone) == (200, 0)


def test_events_of_agents_that_never_started_training_are_ignored() -> None:
    events = [event("warning", "i-standby", 1, step=5), {"kind": "start"}, event("start", "i-1", 2),
              event("done", "i-1", 3, step=True), event("done", "i-1", 4, step=10)]
    assert work_done(training_stretches(events)) == Work(computed=10, redone=0)


def test_an_agent_waiting_for_the_lease_does_not_stretch_its_instances_earlier_run_over_the_next() -> None:
    """i-1's agent restarts while i-2 has taken over from step 40: i-1 ran 0 → 60, i-2 redoes 40 → 60."""
    events = [event("start", "i-1", 1), event("checkpoint", "i-1", 5, step=40), event("start", "i-2", 10),
              event("resume", "i-2", 11, step=40), event("lease_wait", "i-1", 12, holder="i-2"),
              event("done", "i-2", 20, step=100)]
    work = work_done(training_stretches(events, [life("i-1", 6, 60)]))
    assert (work.computed, work.redone) == (120, 20)


def test_a_step_fetched_for_a_round_is_not_counted_as_trained() -> None:
    # i-1 trains to 100 (checkpoint 60) and is lost; its replacement fetches step 60 for the next round and
    # is lost before it trains: it computed nothing.
    events = [event("start", "i-1", 1), event("checkpoint", "i-1", 40, step=60),
              event("interruption", "i-1", 50, step=100), event("start", "i-2", 60),
              event("round_resume", "i-2", 61, step=60)]
    assert work_done(training_stretches(events)) == Work(computed=100, redone=0)
