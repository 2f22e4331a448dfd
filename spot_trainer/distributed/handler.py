"""The `s3` rendezvous handler for torchrun, and its registration.

`--rdzv-backend=s3 --rdzv-endpoint=<bucket>/<job>` keeps the rendezvous under
`s3://<bucket>/<job>/rendezvous/<rdzv id>/`. torchrun finds the handler through the
`torchrun.handlers` entry point when the package is installed; `register()` does the same for a
process that runs torchrun in-process (our launcher), installed or not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from torch.distributed.elastic.rendezvous import RendezvousHandler, RendezvousInfo, RendezvousParameters
from torch.distributed.elastic.rendezvous.api import rendezvous_handler_registry
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
    DynamicRendezvousHandler,
    _DistributedRendezvousOpExecutor,
    _RendezvousExitOp,
    create_handler,
)

from ..storage.s3.job_keys import job_key, rendezvous_prefix
from ..storage.s3.s3client import s3_client
from ..storage.steps.other_regions import OtherRegions
from ..storage.steps.remote import RemoteStore
from .round_start import start_round
from .rounds import ROUND_FILE_ENV, ROUND_RESUME_ENV, Round, write_round
from .s3_backend import S3RendezvousBackend, S3StateHolder
from .s3_joins import JOIN, LEAVE, WAIT
from .s3_objects import ConditionalObjects, S3ObjectError
from .s3_store import S3Store

BACKEND = "s3"
FORMING_READ_SECONDS = 1.0  # torch's own state cache while a round forms


def endpoint_parts(endpoint: str) -> tuple[str, str]:
    """'bucket/job' (an s3:// prefix is accepted) → (bucket, job)."""
    bucket, _, prefix = endpoint.removeprefix("s3://").partition("/")
    if not bucket or not prefix.strip("/"):
        raise ValueError(f"the s3 rendezvous endpoint must be <bucket>/<job prefix>, got {endpoint!r}")
    return bucket, prefix.strip("/")


class LeavingRendezvousHandler(DynamicRendezvousHandler):
    """Shutting down leaves the rendezvous instead of closing it.

    torchrun shuts its handler down whenever its workers fail, and torch's handler then *closes* the
    rendezvous for every node, for good. Here a failure is a lost peer, after which the survivors'
    agents start torchrun again under the same id: this node must step out, not lock the others out.
    The job's end is the agents' business (status.json), not the rendezvous'.

    For a command of the user's own, a peer gone is a new round too, and every round starts its
    workers from one step published in S3 (round_start.py).
    """

    remote: RemoteStore | None = None  # the job's checkpoints in S3 (set by create_s3_handler)
    elsewhere: OtherRegions | None = None  # a job of several regions: its buckets in the others
    objects: ConditionalObjects | None = None  # the rendezvous' own objects (set by create_s3_handler)
    published_last_round = False  # this node held group rank 0 in the round before
    round_members: frozenset[Any] = frozenset()  # the nodes of the round this node is in
    peer_dead = False  # a node of this round stopped its heartbeats without leaving: no save can complete

    def _close(self) -> None:
        if self.objects is not None:  # before leaving, so a peer that sees it gone finds the mark
            try:
                self.objects.put(_left_mark(self._this_node), b"")
            except S3ObjectError:  # unmarked, the peers take this node for dead: 3 s for their ranks, not the grace
                pass
        self._op_executor.run(_RendezvousExitOp(), self._get_deadline(self._settings.timeout.close))

    def _left(self, node: Any) -> bool:
        """The node left the rendezvous itself (its torchrun shut down) rather than die."""
        return self.objects is not None and self.objects.read(_left_mark(node)) is not None

    def num_nodes_waiting(self) -> int:
        """Above 0, torchrun stops its workers and joins a new round. torch counts nodes waiting to join;
        for a command of the user's own, a peer of this round gone (it left, or missed three heartbeats)
        counts too: its ranks would otherwise sit in a collective on the dead peer until their framework's
        timeout (30 minutes by default). The built-in trainer times its own collectives out. A peer that
        died rather than left marks the round's end as hopeless for saves (launch.py stops it quickly)."""
        waiting = super().num_nodes_waiting()
        if waiting or not self.round_members or os.environ.get(ROUND_RESUME_ENV) != "1":
            return waiting
        with self._heartbeat_lock:  # the keep-alive thread drops dead nodes from the same state
            present = set(self._state_holder.state.participants)
        gone = self.round_members - present
        self.peer_dead = not all(self._left(node) for node in gone)
        return int(bool(gone))

    def next_rendezvous(self) -> RendezvousInfo:
        """Join a round; tell this node's agent which round and rank (spot_trainer.distributed.rounds); for a command
        of the user's own, bring this node's disk to the round's one step (round_start)."""
        holder = self._state_holder
        if isinstance(holder, S3StateHolder):
            holder.read_at_most_every(FORMING_READ_SECONDS)
        info = super().next_rendezvous()
        if isinstance(holder, S3StateHolder):
            holder.read_at_most_every(max(FORMING_READ_SECONDS, self._settings.keep_alive_interval.total_seconds() / 2))
        state = holder.state
        self.round_members, self.peer_dead = frozenset(state.participants), False
        if path := os.environ.get(ROUND_FILE_ENV):
            nodes = tuple(sorted({node.addr for node in state.participants}))
            write_round(Path(path), Round(number=state.round, group_rank=info.rank, nodes=nodes))
        if os.environ.get(ROUND_RESUME_ENV) == "1" and self.remote is not None:
            start_round(info.store, info.rank, info.world_size, self.remote, self.published_last_round,
                        self.elsewhere)
        self.published_last_round = info.rank == 0
        return info


class PlainJoinExecutor(_DistributedRendezvousOpExecutor):
    """torch's executor, but a node's join, wait for the next round and leave are its own plain PUT
    (S3StateHolder.write_op), not a conditional write of the shared state."""

    _state_holder: S3StateHolder

    def _add_to_participants(self) -> None:
        self._state_holder.write_op(self._node, JOIN)

    def _add_to_wait_list(self) -> None:
        self._state_holder.write_op(self._node, WAIT)

    def _remove_from_participants(self) -> None:
        self._state_holder.write_op(self._node, LEAVE)


_CREATED: list[LeavingRendezvousHandler] = []  # this process's handlers (torchrun makes one)


def leave_after_a_signal() -> None:
    """torchrun leaves its handler be when a signal stops it (torch's own would close the rendezvous for
    every node); ours only leaves, so it leaves, marked: the peers see a leave, not a death."""
    for handler in _CREATED:
        try:
            handler.shutdown()  # False when the rendezvous refused the leave; the peers then find it dead
        except Exception as error:  # noqa: BLE001 - leaving is the last act before exit: the exit must stand
            print(f"spot-trainer: could not leave the rendezvous: {error}", file=sys.stderr, flush=True)


def _left_mark(node: Any) -> str:
    return f"left/{node!r}"  # torch names a node <addr>_<pid>_<local id>


def create_s3_handler(params: RendezvousParameters) -> RendezvousHandler:
    bucket, prefix = endpoint_parts(params.endpoint)
    objects = ConditionalObjects(s3_client(), bucket, job_key(prefix, rendezvous_prefix(params.run_id)))
    store_timeout = timedelta(seconds=params.get_as_int("store_timeout", 300) or 300)
    backend = S3RendezvousBackend(objects)
    handler = create_handler(S3Store(objects, store_timeout), backend, params)
    handler.__class__ = LeavingRendezvousHandler  # torch builds the handler; it differs in its shutdown and round start
    assert isinstance(handler, LeavingRendezvousHandler)
    # torch gives its handler and the handler's executor a state holder that writes every heartbeat into the
    # shared state; ours writes each node's to its own object, and each join and leave too (s3_backend.py)
    handler._state_holder = S3StateHolder(backend, handler.settings)
    handler._op_executor = PlainJoinExecutor(handler._this_node, handler._state_holder, handler.settings)
    handler.remote, handler.objects = RemoteStore(s3_client(), bucket, prefix), objects
    handler.elsewhere = OtherRegions.from_environment(prefix)
    _CREATED.append(handler)
    return handler


def handler_factory() -> Callable[[RendezvousParameters], RendezvousHandler]:
    """What the `torchrun.handlers` entry point names: torch calls it and registers the result."""
    return create_s3_handler


def register() -> None:
    try:
        rendezvous_handler_registry.register(BACKEND, create_s3_handler)
    except ValueError:  # already registered (the entry point got there first): the same handler
        pass
