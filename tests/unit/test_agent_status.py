"""status.json: published on every state change, throttled for progress, carried over between agents."""

from __future__ import annotations

from spot_trainer.agent.records.status import JobStatus, StatusReporter, describe_job
from spot_trainer.storage.s3.latest_record import LatestRecord
from tests.support.clock import ManualClock


def test_state_changes_publish_at_once_and_progress_at_most_every_interval() -> None:
    published: list[dict] = []
    clock = ManualClock(start=100.0)
    reporter = StatusReporter(JobStatus(job="j"), publish=published.append, interval_seconds=0.3, clock=clock)
    reporter.update(state="TRAINING")
    assert [p["state"] for p in published] == ["TRAINING"]
    for step in range(1, 6):
        reporter.update(step=step)
        reporter.tick()
    assert len(published) == 1, "progress inside the interval waits"
    clock.advance(0.29)
    reporter.tick()
    assert len(published) == 1, "still inside the interval"
    clock.advance(0.02)
    reporter.tick()
    assert published[-1]["step"] == 5 and len(published) == 2
    reporter.tick()
    assert len(published) == 2, "nothing new, nothing sent"


def test_a_warning_is_published_at_once() -> None:
    published: list[dict] = []
    reporter = StatusReporter(JobStatus(job="j"), publish=published.append, interval_seconds=60,
                              clock=ManualClock(start=100.0))
    reporter.update(state="TRAINING")
    reporter.update(step=3)
    reporter.update(warning="the command started over: …")
    assert [(p["step"], p["warning"]) for p in published] == [(None, ""), (3, "the command started over: …")]


def test_a_new_agent_carries_counters_and_progress_over() -> None:
    previous = {"state": "INTERRUPTED", "step": 120, "checkpoint_step": 120, "attempt": 3, "interruptions": 2,
                "reason": "spot interruption notice", "instance": "i-old"}
    status = JobStatus.carried_over(previous, "j", "i-new")
    assert (status.step, status.checkpoint_step, status.attempt, status.interruptions) == (120, 120, 3, 2)
    assert (status.instance, status.state, status.reason) == ("i-new", "STARTING", "")
    assert JobStatus.carried_over(None, "j", "i-1").attempt == 0


def test_summary_names_state_progress_and_events() -> None:
    text = describe_job({"job": "cifar", "state": "FAILED", "step": 7, "attempt": 3, "interruptions": 0,
                         "reason": "command exited with code 1: boom"}, LatestRecord(5),
                        [{"kind": "failure"}, {"kind": "failure"}, {"kind": "start"}])
    assert "state          FAILED" in text and "checkpoint     5 (latest in S3)" in text
    assert "reason         command exited with code 1: boom" in text
    assert "events         failure 2, start 1" in text
    assert describe_job(None, None, []).startswith("no status yet")


def test_summary_says_from_which_step_exact_resume_was_lost_and_why() -> None:
    status = {"job": "cifar", "state": "TRAINING", "step": 900}
    events = ({"kind": "not_bit_identical", "step": step, "reason": reason} for step, reason in (
        (700, "trained on another platform (device NVIDIA A10G -> Tesla T4)"),
        (400, "trained on another platform (device Tesla T4 -> NVIDIA A10G)")))
    text = describe_job(status, LatestRecord(880), events)  # a generator, as read from S3 once
    assert ("exact resume   lost from step 400: trained on another platform (device Tesla T4 -> NVIDIA A10G) "
            "(and 1 more)") in text
    assert "events         not_bit_identical 2" in text
    assert "exact resume" not in describe_job(status, LatestRecord(880), [{"kind": "resume", "step": 400}])


def test_a_recorded_event_without_a_whole_step_still_reads() -> None:
    events = [{"kind": "not_bit_identical", "step": "x", "reason": "a script's own line"},
              {"kind": "not_bit_identical", "step": 40, "reason": "trained on another platform (world size 2 -> 1)"}]
    text = describe_job({"job": "j"}, None, events)
    assert "exact resume   lost from step x: a script's own line (and 1 more)" in text


PAUSE_STOP = {"state": "INTERRUPTED", "reason": "scale-in (lifecycle Terminated)", "interruptions": 1, "step": 420}
PAUSED_EVENTS = [{"kind": "start", "instance": "i-c", "epoch": 1_790_000_560.0},
                 {"kind": "paused", "instance": "user", "epoch": 1_790_000_660.0},
                 {"kind": "interruption", "instance": "i-c", "epoch": 1_790_000_670.0, "step": 420,
                  "reason": "scale-in (lifecycle Terminated)"}]


def test_a_paused_job_reads_paused_not_interrupted_and_its_stop_is_not_counted() -> None:
    text = describe_job({"job": "cnn", **PAUSE_STOP}, LatestRecord(420), PAUSED_EVENTS)
    assert "state          PAUSED" in text and "reason         paused at 2026-09-21T14:24:20+00:00 (spot-trainer " \
                                                "pause)" in text
    assert "INTERRUPTED" not in text and "scale-in" not in text
    assert "interruptions  0 with a notice; power-offs unknown (no instance records to see them by); 1 stop(s) by " \
           "a pause not counted" in text


def test_a_pause_in_flight_a_resume_awaiting_its_instance_and_a_finished_job_read_as_they_are() -> None:
    saving = describe_job({"job": "cnn", "state": "STOPPING"}, None, PAUSED_EVENTS[:2])
    assert "state          PAUSING" in saving and "the instances save their step, upload it and leave" in saving
    resumed = [*PAUSED_EVENTS, {"kind": "resumed", "instance": "user", "epoch": 1_790_000_800.0}]
    waiting = describe_job({"job": "cnn", **PAUSE_STOP}, None, resumed)
    assert "state          RESUMING" in waiting and "scale-in" not in waiting
    training = [*resumed, {"kind": "start", "instance": "i-d", "epoch": 1_790_000_815.0}]
    assert "state          TRAINING" in describe_job({"job": "cnn", "state": "TRAINING"}, None, training)
    done = describe_job({"job": "cnn", "state": "DONE"}, None, training)
    assert "state          DONE" in done and "PAUSED" not in done and "resume" not in done.split("events")[0]
