"""A join, a wait and a leave written as a node's own object: named so any reader can tell which, and applied
to the round with torch's rules, whatever order and however often a reader sees them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
    RendezvousSettings,
    RendezvousTimeout,
    _NodeDesc,
    _RendezvousState,
)

from spot_trainer.distributed.s3_joins import JOIN, LEAVE, WAIT, Op, apply_op, parse_op

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def settings(min_nodes: int, max_nodes: int) -> RendezvousSettings:
    return RendezvousSettings(run_id="job", min_nodes=min_nodes, max_nodes=max_nodes,
                              timeout=RendezvousTimeout(last_call=timedelta(seconds=30)),
                              keep_alive_interval=timedelta(seconds=5), keep_alive_max_attempt=3)


def node(index: int) -> _NodeDesc:
    return _NodeDesc(f"ip-10-0-0-{index}.ec2_internal", 4242, index)  # an address with an underscore


def test_an_ops_name_tells_its_round_kind_and_node_and_other_names_are_not_ops() -> None:
    op = Op(7, WAIT, node(3))
    assert parse_op(op.name) == op
    assert parse_op("state.heartbeat/10.0.0.1_1_0") is None
    assert parse_op("state.op/7/join/no-pid") is None, "a node name torch did not write"
    assert parse_op("state.op/7/shout/10.0.0.1_1_0") is None


def test_joins_fill_the_round_and_the_last_one_due_makes_it_ready_to_complete() -> None:
    state, rules = _RendezvousState(), settings(2, 3)
    assert apply_op(state, Op(0, JOIN, node(1)), NOW, rules)
    assert state.deadline is None, "below min_nodes: no last call"
    assert apply_op(state, Op(0, JOIN, node(2)), NOW, rules)
    assert state.deadline == NOW + timedelta(seconds=30), "min_nodes reached: the last-call window opens"
    assert not apply_op(state, Op(0, JOIN, node(2)), NOW, rules), "a join seen twice changes nothing"
    assert apply_op(state, Op(0, JOIN, node(3)), NOW + timedelta(seconds=1), rules)
    assert state.deadline == NOW + timedelta(seconds=1), "max_nodes: due at once"
    assert not apply_op(state, Op(0, JOIN, node(4)), NOW, rules), "no room past max_nodes"
    assert set(state.participants) == {node(1), node(2), node(3)} and not state.complete
    assert state.last_heartbeats[node(3)] == NOW + timedelta(seconds=1), "a join is the node's beat"


def test_a_join_for_another_round_or_a_closed_rendezvous_changes_nothing_but_a_leave_does() -> None:
    state, rules = _RendezvousState(), settings(1, 3)
    state.round = 4
    assert not apply_op(state, Op(3, JOIN, node(1)), NOW, rules)
    state.closed = True
    assert not apply_op(state, Op(4, JOIN, node(1)), NOW, rules)
    assert not state.participants
    state.participants[node(2)] = 0
    assert apply_op(state, Op(4, LEAVE, node(2)), NOW, rules) and not state.participants, "leaving stays open"


def test_a_node_late_for_a_complete_round_waits_and_the_last_leave_opens_the_next_round() -> None:
    state, rules = _RendezvousState(), settings(1, 3)
    for index in (1, 2):
        apply_op(state, Op(0, JOIN, node(index)), NOW, rules)
    assert not apply_op(state, Op(0, WAIT, node(3)), NOW, rules), "no wait list before the round is complete"
    state.complete = True
    assert not apply_op(state, Op(0, JOIN, node(3)), NOW, rules), "a complete round takes no join"
    assert apply_op(state, Op(0, WAIT, node(3)), NOW, rules) and state.wait_list == {node(3)}
    assert apply_op(state, Op(0, LEAVE, node(1)), NOW, rules)
    assert not apply_op(state, Op(0, LEAVE, node(1)), NOW, rules), "a leave seen twice changes nothing"
    assert state.round == 0 and state.complete
    assert apply_op(state, Op(0, LEAVE, node(2)), NOW, rules)
    assert (state.round, state.complete, state.participants) == (1, False, {}), "the next round opens"
    assert apply_op(state, Op(1, JOIN, node(3)), NOW, rules) and not state.wait_list
