"""Joins and leaves of the round as plain objects, one per node, that every reader applies to the state.

torch's dynamic rendezvous writes a join as a compare-and-set of the one shared state: at 128 nodes joining
at once, one write wins per round trip and the others read and try again (199 s to form at 80 ms). Here a
node joins (the participants of round R, or the wait list for the next) and leaves by a plain PUT of its own
object, `state.op/<R>/<join|wait|leave>/<node>`; whoever reads the state applies every such object listed
with it, oldest first, with torch's own rules for the change (`apply_op`). The shared state is then written
(conditionally, as before) only to decide the round: complete, closed, a node put in or out of the
redundancy list. The first node to see a full round, or the last-call window past, marks it complete in one
write that takes every join listed so far.

An object applies only to the round it names, and changes nothing when the state already holds it, so one
left listed after a write that took it is harmless: each node deletes its own once the shared state has
settled them (their round left, or completed for a join), and the writer of a round those of nodes gone.
A dead node's join still applies, with the age of its last beat: torch's rule (three intervals silent)
drops it from every reader's state alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
    RendezvousSettings,
    _NodeDesc,
    _remove_participant_epilogue,
    _RendezvousState,
)

OPS = "state.op/"  # + <round>/<kind>/<node>; listed with the state object, under one prefix
JOIN, WAIT, LEAVE = "join", "wait", "leave"  # the participants of the round, the wait list, out of the round


@dataclass(frozen=True)
class Op:
    round: int
    kind: str
    node: _NodeDesc

    @property
    def name(self) -> str:
        return f"{OPS}{self.round}/{self.kind}/{self.node!r}"  # torch names a node <addr>_<pid>_<local id>


def parse_op(name: str) -> Op | None:
    """The op an object's name states, or None for a name this module did not write."""
    if not name.startswith(OPS):
        return None
    parts = name[len(OPS):].split("/", 2)
    if len(parts) != 3 or parts[1] not in (JOIN, WAIT, LEAVE):
        return None
    addr, _, rest = parts[2].rpartition("_")
    addr, _, pid = addr.rpartition("_")
    try:
        return Op(int(parts[0]), parts[1], _NodeDesc(addr, int(pid), int(rest)))
    except ValueError:
        return None


def apply_op(state: _RendezvousState, op: Op, heard: datetime, settings: RendezvousSettings) -> bool:
    """The change torch's executor makes for a node's join, wait or leave, made to `state` when it still
    applies (its round, the node not already there, room left): whether it changed the state. `heard` is
    when the object was written, on this host's clock: the node's beat, and the last call's start."""
    if op.round != state.round:
        return False
    if op.kind == LEAVE:  # torch lets a node leave a closed rendezvous too
        return _leave(state, op.node, settings)
    if state.closed:
        return False
    full = len(state.participants) >= settings.max_nodes
    if op.kind == WAIT:
        if not state.complete or full or op.node in state.participants or op.node in state.wait_list:
            return False
        state.redundancy_list.discard(op.node)
        state.wait_list.add(op.node)
    else:
        if state.complete or full or op.node in state.participants:
            return False
        _join(state, op.node, heard, settings)
    state.last_heartbeats[op.node] = max(state.last_heartbeats.get(op.node, heard), heard)
    return True


def _join(state: _RendezvousState, node: _NodeDesc, heard: datetime, settings: RendezvousSettings) -> None:
    """torch's `_add_to_participants`, but for completing the round: at max_nodes its deadline is the join
    itself, so the next node to read marks the round complete (one conditional write, torch's rule)."""
    state.wait_list.discard(node)
    state.participants[node] = 0
    if len(state.participants) == settings.min_nodes:
        state.deadline = heard + settings.timeout.last_call
    if len(state.participants) == settings.max_nodes:
        state.deadline = heard


def _leave(state: _RendezvousState, node: _NodeDesc, settings: RendezvousSettings) -> bool:
    """torch's `_remove_from_participants`: the last to leave a complete round opens the next."""
    if node not in state.participants:
        return False
    del state.participants[node]
    state.last_heartbeats.pop(node, None)
    _remove_participant_epilogue(state, settings)
    return True


def settled(op: Op, persisted_round: int, complete: bool) -> bool:
    """The shared state has settled the op: its round is past, or it is a join of the round completed
    (which took it, or never will)."""
    return op.round < persisted_round or (op.round == persisted_round and complete and op.kind == JOIN)
