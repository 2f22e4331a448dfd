"""The report takes what the agents did from their events, never from their log lines: a line reworded
for people, or gone, changes no stretch and no figure, and the lines alone tell it nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from localcloud.interruptions import HARD, Interruption
from localcloud.journal import LEASE_WAIT, TrainingLog
from localcloud.report import recovery_seconds
from localcloud.work import logged_work

from .journal_support import Entry, fresh, journal_with, restored, round_formed, round_resumed, uploaded

AS_LOGGED = {  # the agent's lines as they read today
    "start": "spot-trainer: no checkpoint yet: starting fresh",
    "resume": "spot-trainer: resuming from checkpoint step {step} (step-{step:08d})",
    "checkpoint": "spot-trainer: checkpoint step {step} uploaded in 0.05s (31969 bytes)",
    "round": "spot-trainer: round {number}: {nodes} node(s), this one group rank {group_rank}",
    "round_resume": "spot-trainer: this round resumes from step {step}, published in S3 (on this disk)",
    "lease_wait": "spot-trainer: another agent holds the job lease (i-0); waiting for it to finish",
}
REWORDED = {
    "start": "spot-trainer: nothing saved yet, training from scratch",
    "resume": "spot-trainer: restored step {step} from S3",
    "checkpoint": "spot-trainer: step {step} is safe in S3",
    "round": "spot-trainer: formed round #{number} with {nodes} nodes (rank {group_rank})",
    "round_resume": "spot-trainer: every node picks up at step {step}",
    "lease_wait": "spot-trainer: standing by for the lease",
}


def silent_ddp_run() -> dict[str, list[tuple[float, dict[str, Any]]]]:
    """Three nodes run a command that prints no steps; node c is lost at 11 s, d takes its place, and the
    round that forms at 12 s resumes from step 40, which the publisher a uploads again as it hands over."""
    return {
        "a": [(0.5, fresh()), (1.0, round_formed(0, 3, 0)), (5.0, uploaded(20)), (9.0, uploaded(40)),
              (12.0, round_formed(1, 3, 0)), (12.5, round_resumed(40)), (13.0, uploaded(40)),
              (16.0, uploaded(60)), (20.0, uploaded(80))],
        "b": [(0.5, fresh()), (1.0, round_formed(0, 3, 1)), (12.0, round_formed(1, 3, 1)), (12.5, round_resumed(40))],
        "c": [(0.5, fresh()), (1.0, round_formed(0, 3, 2))],
        "d": [(10.5, restored(20)), (12.0, round_formed(1, 3, 2)), (12.5, round_resumed(40))],
    }


def with_lines(events: list[tuple[float, dict[str, Any]]], wording: dict[str, str] | None) -> list[tuple[float, Entry]]:
    """Each event with the agent's line about it just before, in `wording` (None: no line at all)."""
    entries: list[tuple[float, Entry]] = []
    for at, event in events:
        if wording is not None:
            entries.append((at, wording[event["kind"]].format(**event)))
        entries.append((at, event))
    return entries


def figures(logs: list[TrainingLog]) -> tuple[Any, ...]:
    work = logged_work(logs)
    stretches = [[(s.started, s.first_step, s.last_step, s.first_step_at, s.last_step_at) for s in log.stretches]
                 for log in logs]
    lost = recovery_seconds(Interruption(HARD, "c", 11.0), logs)
    return (work, lost, stretches, [(log.round_nodes, log.started_fresh, log.resumed_step) for log in logs])


@pytest.mark.parametrize("wording", [AS_LOGGED, REWORDED, None], ids=["as-logged", "reworded", "no-lines"])
def test_the_agents_lines_reworded_or_gone_change_no_figure(tmp_path: Path, wording: dict[str, str] | None) -> None:
    logs = [journal_with(tmp_path / node, with_lines(events, wording)) for node, events in silent_ddp_run().items()]
    work, lost, stretches, facts = figures(logs)
    assert (work.steps_computed, work.redone, work.nodes_together, lost) == (80, 0, 3, 5.0)
    assert stretches[0] == [(0.5, 0, 40, 5.0, 9.0), (12.5, 40, 80, 16.0, 20.0)]
    assert facts == [(3, True, None), (3, False, None), (3, False, None), (3, False, 20)]  # b, c: no progress shown
    unworded = [journal_with(tmp_path / f"{node}-events", events) for node, events in silent_ddp_run().items()]
    assert figures(logs) == figures(unworded)


def test_the_agents_lines_alone_tell_the_report_nothing(tmp_path: Path) -> None:
    lines_only = [[entry for entry in with_lines(events, AS_LOGGED) if isinstance(entry[1], str)]
                  for events in silent_ddp_run().values()]
    logs = [journal_with(tmp_path / str(node), entries) for node, entries in enumerate(lines_only)]
    assert all(log.stretches == [] and log.round_nodes == 0 and not log.started_fresh for log in logs)
    assert logged_work(logs).steps_computed == 0


def test_a_standby_is_known_by_its_event_not_by_its_line(tmp_path: Path) -> None:
    said = journal_with(tmp_path / "said", [(1.0, AS_LOGGED["lease_wait"])])
    recorded = journal_with(tmp_path / "recorded", [(1.0, {"kind": LEASE_WAIT, "holder": "i-0"})])
    assert (said.waited_for_lease, recorded.waited_for_lease) == (False, True)
