"""The local spot cloud's view of recoveries: the report's time from an interruption to the first
step after the next resume (a replacement, or the surviving nodes of a world), and the live line's
world of nodes training now."""

from __future__ import annotations

from pathlib import Path

from localcloud.instance import Instance
from localcloud.journal import training_again_after
from localcloud.progress import training_nodes

from .journal_support import fresh, journal_with, restored, uploaded


def test_training_is_going_again_at_the_first_step_after_a_resume(tmp_path: Path) -> None:
    first = journal_with(tmp_path / "a.log", [
        (1.0, '{"event": "step", "step": 1}'),
        (10.0, '{"event": "resumed", "step": 1}'),  # survivors re-formed after a loss at t=8
        (14.0, '{"event": "step", "step": 2}'),
        (15.0, '{"event": "step", "step": 3}'),
    ])
    replacement = journal_with(tmp_path / "b.log", [
        (30.0, '{"event": "resumed", "step": 3}'),
        (33.0, '{"event": "step", "step": 4}'),
    ])
    logs = [first, replacement]
    assert training_again_after(logs, 8.0) == 14.0
    assert training_again_after(logs, 20.0) == 33.0
    assert training_again_after(logs, 40.0) is None  # nobody has resumed since


def test_a_command_that_prints_no_steps_trains_again_at_its_first_checkpoint_after_the_restore(
    tmp_path: Path
) -> None:
    """Its only progress is the agent's uploads; its resume, the agent's restore (or a fresh start)."""
    first = journal_with(tmp_path / "a.log", [
        (1.0, fresh()),
        (5.0, uploaded(50)),
    ])
    replacement = journal_with(tmp_path / "b.log", [
        (30.0, restored(50)),
        (31.0, "spot-trainer: starting python train.py"),
        (36.0, uploaded(100)),
    ])
    assert training_again_after([first, replacement], 20.0) == 36.0


def test_the_builtin_trainers_own_resume_event_is_the_same_restart_as_the_agents_restore(tmp_path: Path) -> None:
    log = journal_with(tmp_path / "a.log", [
        (30.0, restored(3)),
        (32.0, '{"event": "resumed", "step": 3}'),
        (33.0, '{"event": "step", "step": 4}'),
    ])
    assert [(s.first_step, s.first_step_at) for s in log.stretches] == [(3, 33.0)]


def test_the_world_training_now_is_every_node_that_stepped_in_the_last_seconds(tmp_path: Path) -> None:
    nodes = [Instance(f"i-{n}", "c7i.xlarge", tmp_path / str(n), {}) for n in range(3)]
    logs = {"i-0": journal_with(tmp_path / "0.log", [(100.0, '{"event": "step", "step": 7}')]),
            "i-1": journal_with(tmp_path / "1.log", [(98.0, '{"event": "step", "step": 7}')]),
            "i-2": journal_with(tmp_path / "2.log", [(80.0, '{"event": "step", "step": 3}')])}  # left the world
    assert [node.instance_id for node in training_nodes(nodes, logs, now=101.0)] == ["i-0", "i-1"]
