"""The report's work figures from the instances' journals: a world of nodes computes each step once,
whatever number of nodes and rounds it took, and only steps computed twice count as redone."""

from __future__ import annotations

from pathlib import Path

from localcloud.journal import training_again_after
from localcloud.work import logged_work

from .journal_support import fresh, journal_with, restored, resumed, round_formed, round_resumed, step, uploaded

FRESH = fresh()


def test_three_nodes_that_lose_one_and_take_in_a_replacement_computed_each_step_once(tmp_path: Path) -> None:
    """Round 1: three nodes, 0→46; C is lost. Round 2: A and B from 46 to 60. Round 3: D joins, 60→100."""
    a = journal_with(tmp_path / "a.log", [(0.0, FRESH), (1.0, step(10)), (10.0, step(46)),
                                          (12.0, resumed(46)), (13.0, step(50)), (15.0, step(60)),
                                          (18.0, resumed(60)), (19.0, step(70)), (30.0, step(100))])
    b = journal_with(tmp_path / "b.log", [(0.0, FRESH), (1.0, step(10)), (10.0, step(46)),
                                          (12.0, resumed(46)), (13.0, step(50)), (15.0, step(60)),
                                          (18.0, resumed(60)), (19.0, step(70)), (30.0, step(100))])
    c = journal_with(tmp_path / "c.log", [(0.0, FRESH), (1.0, step(10)), (10.0, step(46))])
    d = journal_with(tmp_path / "d.log", [
        (14.0, restored(46)),
        (18.0, resumed(60)),  # with the world, from its newer checkpoint, once it re-forms
        (19.0, step(70)), (30.0, step(100))])
    work = logged_work([a, b, c, d])
    assert (work.steps_computed, work.redone, work.nodes_together) == (100, 0, 3)
    assert (a.steps_run, c.steps_run, d.steps_run) == (100, 46, 40)


def test_steps_past_the_last_save_of_a_node_powered_off_are_redone_by_its_replacement(tmp_path: Path) -> None:
    first = journal_with(tmp_path / "a.log", [(0.0, FRESH), (1.0, step(1)), (37.0, step(37))])
    replacement = journal_with(tmp_path / "b.log", [(50.0, resumed(30)), (51.0, step(31)), (60.0, step(40))])
    work = logged_work([first, replacement])
    assert (work.steps_computed, work.redone, work.nodes_together) == (47, 7, 1)


def test_a_command_restarted_on_the_same_instance_counts_both_of_its_runs(tmp_path: Path) -> None:
    log = journal_with(tmp_path / "a.log", [(0.0, FRESH), (1.0, step(1)), (20.0, step(20)),
                                            (25.0, resumed(10)), (26.0, step(11)), (35.0, step(30))])
    work = logged_work([log])
    assert (log.steps_run, work.steps_computed, work.redone) == (40, 40, 10)


def test_a_steps_time_is_taken_between_step_lines_not_from_the_resume(tmp_path: Path) -> None:
    """Logged every 10 steps: the first line after a resume at 46 is step 50, 4 steps already done."""
    log = journal_with(tmp_path / "a.log", [(0.0, resumed(46)), (10.0, step(50)), (12.0, step(60))])
    assert logged_work([log]).seconds_per_step == 0.2
    assert logged_work([log]).steps_computed == 14


def test_a_silent_command_on_three_nodes_trains_again_when_its_round_resumes(tmp_path: Path) -> None:
    """A command that prints no steps shows its progress only in the uploads of the node that publishes;
    after a peer's loss torchrun restarts the workers (not the agent the command), and the round says
    which published step every node resumes from. Its world is the round's size, not the uploads'."""
    publisher = journal_with(tmp_path / "publisher", [
        (1.0, round_formed(0, nodes=3, group_rank=0)),
        (5.0, uploaded(20)),
        (9.0, uploaded(40)),
        (12.0, round_formed(1, nodes=3, group_rank=0)),  # a peer lost at 11 s
        (12.5, round_resumed(40)),
        (13.0, uploaded(40)),  # the hand-over, uploaded late
        (16.0, uploaded(60)),
    ])
    peer = journal_with(tmp_path / "peer", [(1.0, round_formed(0, nodes=3, group_rank=1))])
    assert training_again_after([publisher, peer], 11.0) == 16.0  # its first checkpoint after the loss
    work = logged_work([publisher, peer])
    assert (work.steps_computed, work.redone, work.nodes_together) == (60, 0, 3)
