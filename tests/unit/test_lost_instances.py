"""Every lost instance counts, once, and only a lost one: a notice outside a pause, a power-off the records
show, never a pause's stop nor the scale-in at the job's end; and what each cost in redone work is said as a
floor, or as unknown with why, never as a 0 that means unknown."""

from __future__ import annotations

from typing import Any

from spot_trainer.costs.instance_records import InstanceLife
from spot_trainer.costs.loss_text import describe_losses, loss_line
from spot_trainer.costs.lost_instances import Loss, LossKind, find_losses

T0 = 1_790_000_000.0


def event(kind: str, instance: str, at: float, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "instance": instance, "epoch": T0 + at, **fields}


def life(instance: str, launched: float, seen: float, stopped: float | None, step: int | None = None,
         on_disk: int | None = None) -> InstanceLife:
    return InstanceLife(instance, "g5.xlarge", "us-east-1a", "spot", T0 + launched, T0 + seen,
                        None if stopped is None else T0 + stopped, step, heartbeat_seconds=2.0,
                        disk_checkpoint_step=on_disk)


def when(epoch: float) -> str:
    return f"T+{epoch - T0:.0f}"


def test_a_power_off_seen_by_its_replacement_counts_at_its_last_sign_of_life() -> None:
    events = [event("start", "i-a", 5), event("checkpoint", "i-a", 98, step=200),
              event("start", "i-b", 160), event("resume", "i-b", 165, step=200)]
    lives = [life("i-a", 0, 97, None, step=260, on_disk=240), life("i-b", 150, 400, 400, step=500)]
    [loss] = find_losses(events, lives, now=T0 + 10_000, job_running=True).lost
    # The checkpoint event came after the last heartbeat: the nearest measured moment of the power-off.
    assert (loss.kind, loss.at, loss.resumed_from, loss.redone_at_least) == (LossKind.POWER_OFF, T0 + 98, 200, 60)
    text = describe_losses(find_losses(events, lives, now=T0 + 10_000, job_running=True), when)
    assert text == ["interruptions  1: 0 with a notice, 1 power-off",
                    "  i-a          power-off, last seen T+98; its record: step 260, checkpoint 240 on its disk; "
                    "the next round resumed from step 200: at least 60 steps redone"]


def test_a_pause_stop_is_no_interruption_but_a_notice_after_the_resume_is() -> None:
    events = [event("start", "i-a", 5), event("paused", "user", 100),
              event("interruption", "i-a", 104, step=300, reason="scale-in (lifecycle Terminated)"),
              event("resumed", "user", 200), event("start", "i-b", 230), event("resume", "i-b", 232, step=300),
              event("interruption", "i-b", 400, step=450, reason="spot interruption notice")]
    lives = [life("i-a", 0, 105, 105, step=300), life("i-b", 220, 405, 405, step=450)]
    losses = find_losses(events, lives, now=T0 + 10_000, job_running=False)
    assert [(loss.instance, loss.kind) for loss in losses.lost] == [("i-b", LossKind.NOTICE)]
    assert losses.pause_stops == 1
    assert describe_losses(losses, when)[0] == "interruptions  1: 1 with a notice, 0 power-offs; 1 stop(s) by a " \
                                               "pause not counted"
    # Nothing has resumed after i-b's notice: what it cost is not known yet, and says so.
    assert describe_losses(losses, when)[1].endswith("redone: unknown (no round has started since)")


def test_instances_the_end_or_a_pause_scaled_in_before_writing_their_stop_are_not_lost() -> None:
    # Several nodes: i-a records the end, i-b leaves with it and is gone before its record says stopped.
    events = [event("start", "i-a", 5), event("start", "i-b", 6), event("done", "i-a", 300, step=900)]
    lives = [life("i-a", 0, 301, 301, step=900), life("i-b", 0, 299, None, step=900)]
    assert find_losses(events, lives, now=T0 + 10_000, job_running=False).lost == []
    # A job stopped at its budget and started again: a node lost after the new start is lost.
    again = [*events[:2], event("budget", "i-a", 300, step=900), event("start", "i-c", 500)]
    lives = [life("i-a", 0, 301, 301), life("i-b", 0, 299, None), life("i-c", 490, 700, None, step=950)]
    lost = find_losses(again, lives, now=T0 + 10_000, job_running=False).lost
    assert [(loss.instance, loss.kind) for loss in lost] == [("i-c", LossKind.POWER_OFF)]


def test_an_instance_that_still_beats_is_not_lost_and_one_notice_counts_once() -> None:
    events = [event("start", "i-a", 5), event("interruption", "i-a", 50, step=40, reason="spot interruption notice")]
    lives = [life("i-a", 0, 51, None, step=40),  # the notice ran out before it wrote its stop
             life("i-b", 60, 100, None)]  # beating now
    losses = find_losses(events, lives, now=T0 + 103, job_running=True)
    assert [(loss.instance, loss.kind) for loss in losses.lost] == [("i-a", LossKind.NOTICE)]


def test_what_a_loss_cost_is_unknown_with_why_never_zero() -> None:
    events = [event("start", "i-a", 5), event("lease_wait", "i-s", 20), event("start", "i-b", 100)]
    lives = [life("i-a", 0, 50, None), life("i-s", 10, 60, None), life("i-b", 90, 300, 300, step=80)]
    losses = find_losses(events, lives, now=T0 + 10_000, job_running=False)
    lines = describe_losses(losses, when)
    assert lines[0] == "interruptions  2: 0 with a notice, 2 power-offs"
    # i-a printed no step and had no checkpoint: its work is unknown, not 0.
    assert lines[1].endswith("its record holds no step; the next round resumed from step 0; redone: unknown (no "
                             "step of it was recorded)")
    # The standby trained nothing: that is known.
    assert lines[2].endswith("redone: none, it trained nothing (it waited for the job lease)")


def test_without_instance_records_power_offs_are_unknown_not_zero() -> None:
    events = [event("start", "i-a", 5), event("interruption", "i-a", 50, step=40, reason="spot interruption notice")]
    losses = find_losses(events, [], now=T0 + 100, job_running=False)
    assert describe_losses(losses, when)[0] == ("interruptions  1 with a notice; power-offs unknown (no instance "
                                                "records to see them by)")


def test_a_real_instance_id_stays_apart_from_what_befell_it() -> None:
    loss = Loss("i-64c499740e17abe55", LossKind.NOTICE, 0.0, "spot interruption notice", trained=True, saved_step=40,
                record_step=40, disk_checkpoint_step=None, resumed_from=40)
    assert loss_line(loss, lambda at: "t0").startswith("  i-64c499740e17abe55 notice at t0")
