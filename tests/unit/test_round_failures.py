"""Several nodes: a failed round counts against the restart budget only when the next round forms
from the same nodes; a round's record is read whole or not at all."""

from __future__ import annotations

from pathlib import Path

from spot_trainer.agent.several_nodes.round_failures import RoundFailures, RoundVerdict
from spot_trainer.distributed.rounds import Round, read_round, write_round

THREE = ("10.0.0.1", "10.0.0.2", "10.0.0.3")
TWO = ("10.0.0.1", "10.0.0.2")


def test_a_lost_peer_is_forgiven_even_with_a_budget_of_one() -> None:
    failures = RoundFailures(budget=1)
    assert failures.failed(THREE, "exit 1") is None  # not decided yet: the next round says
    assert failures.round_formed(TWO) is RoundVerdict.CHANGED
    assert failures.count == 0
    assert failures.failed(TWO, "exit 1") is None and failures.round_formed(THREE) is RoundVerdict.CHANGED


def test_failures_that_repeat_in_one_world_spend_the_budget() -> None:
    failures = RoundFailures(budget=3)
    for _ in range(2):
        assert failures.failed(THREE, "exit 1") is None
        assert failures.round_formed(THREE) is None
    assert failures.failed(THREE, "ImportError") is None
    assert failures.round_formed(THREE) is RoundVerdict.EXHAUSTED
    assert (failures.count, failures.reason) == (3, "ImportError")


def test_a_round_formed_without_a_failure_before_it_decides_nothing() -> None:
    assert RoundFailures(budget=1).round_formed(THREE) is None


def test_failing_again_before_any_round_forms_ends_it_once_the_budget_is_spent() -> None:
    failures = RoundFailures(budget=2)
    assert failures.failed(None, "rendezvous timed out") is None
    assert failures.failed(None, "rendezvous timed out") is None  # second failure, still no round
    assert failures.failed(None, "rendezvous timed out") is RoundVerdict.EXHAUSTED


def test_a_round_record_is_read_back_and_a_damaged_one_is_no_round(tmp_path: Path) -> None:
    path = tmp_path / "round.json"
    write_round(path, Round(number=4, group_rank=0, nodes=TWO))
    assert read_round(path) == Round(number=4, group_rank=0, nodes=TWO)
    assert read_round(path).publishes  # type: ignore[union-attr]
    for damaged in ("", "{", '{"number": 4}', "[]"):
        path.write_text(damaged)
        assert read_round(path) is None
    assert read_round(tmp_path / "absent.json") is None
