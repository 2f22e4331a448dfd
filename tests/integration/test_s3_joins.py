"""torch's dynamic rendezvous over moto with joins and leaves as each node's own object: a round of eight
forms with one write of the shared state, torch's rules stand (last call, wait list, closing), and a node
that stops beating is dropped after three missed beats, not before."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from torch.distributed.elastic.rendezvous import RendezvousClosedError, RendezvousParameters
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _RendezvousCloseOp

from spot_trainer.distributed.handler import create_s3_handler
from spot_trainer.distributed.s3_backend import S3RendezvousBackend
from spot_trainer.distributed.s3_joins import OPS

KEEP_ALIVE, MISSED = 1, 3


def params(bucket: str, node: int, min_nodes: int, max_nodes: int) -> RendezvousParameters:
    return RendezvousParameters(backend="s3", endpoint=f"{bucket}/job", run_id="job", min_nodes=min_nodes,
                                max_nodes=max_nodes, local_addr=f"127.0.0.{node}", last_call_timeout=2,
                                join_timeout=90, keep_alive_interval=KEEP_ALIVE, keep_alive_max_attempt=MISSED)


@pytest.fixture
def state_writes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every conditional write of the shared state: True where it won."""
    written: list[bool] = []
    original = S3RendezvousBackend.write_if

    def counted(backend: S3RendezvousBackend, state: bytes, token: Any) -> str | None:
        etag = original(backend, state, token)
        written.append(etag is not None)
        return etag

    monkeypatch.setattr(S3RendezvousBackend, "write_if", counted)
    return written


def wait_for(condition: Any, seconds: float) -> float:
    """Seconds until `condition()` held; fails past `seconds`."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, f"not within {seconds} s"
        time.sleep(0.1)
    return time.monotonic() - started


def test_eight_nodes_form_one_round_with_one_write_and_a_silent_node_is_dropped_after_three_beats(
    aws_env: dict[str, str], bucket: str, state_writes: list[bool]
) -> None:
    handlers = [create_s3_handler(params(bucket, node, 8, 8)) for node in range(1, 9)]
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            infos = list(pool.map(lambda handler: handler.next_rendezvous(), handlers))
        assert sorted(info.rank for info in infos) == list(range(8)) and {info.world_size for info in infos} == {8}
        assert state_writes.count(True) == 1, "the joins are plain objects: one write completes the round"
        backend = handlers[0]._state_holder._backend
        assert len(handlers[0]._state_holder.state.participants) == 8
        # each node deletes its join once the round is complete: a round that trains lists the state and beats
        wait_for(lambda: not backend.objects.names(OPS), 30)
        handlers[7]._stop_heartbeats()  # the node dies: no beat, no leave
        silent_from = time.monotonic()
        watchers = handlers[:7]

        def dropped() -> bool:
            return all(handlers[7]._this_node not in watcher._state_holder.state.participants
                       for watcher in watchers if watcher.num_nodes_waiting() == 0)

        assert not dropped()
        wait_for(dropped, 30)
        silent = time.monotonic() - silent_from
        # its last beat may be up to one interval before it fell silent; S3's seconds give one back
        assert silent >= MISSED * KEEP_ALIVE - KEEP_ALIVE - 1, f"dropped after {silent:.1f} s of silence"
        assert all(len(watcher._state_holder.state.participants) == 7 for watcher in watchers), \
            "no live node was dropped"
    finally:
        for handler in handlers:
            handler._stop_heartbeats()


def test_the_last_call_window_the_wait_list_and_closing_stand(
    aws_env: dict[str, str], bucket: str, state_writes: list[bool]
) -> None:
    first, second, late = (create_s3_handler(params(bucket, node, 2, 3)) for node in (1, 2, 3))
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda handler: handler.next_rendezvous(), (first, second)))
        assert time.monotonic() - started >= 2, "min_nodes joined: the round waited out the last call"
        assert first.num_nodes_waiting() == 0
        waiting = threading.Thread(target=lambda: _quietly(late.next_rendezvous))
        waiting.start()
        first._state_holder.read_at_most_every(0)
        wait_for(lambda: first.num_nodes_waiting() == 1, 30)  # the late node waits for the next round
        assert late._this_node in first._state_holder.state.wait_list
        # this project's handler leaves where torch's closes (handler.py); torch's close, run on its executor:
        first._op_executor.run(_RendezvousCloseOp(), time.monotonic() + 30)
        assert state_writes.count(True) == 2, "the completion and the close: the only writes of the state"
        waiting.join(timeout=60)
        assert not waiting.is_alive()
        with pytest.raises(RendezvousClosedError):
            second.next_rendezvous()
    finally:
        for handler in (first, second, late):
            handler._stop_heartbeats()


def _quietly(call: Any) -> None:
    try:
        call()
    except RendezvousClosedError:  # the close this test makes
        pass


def test_the_survivors_of_a_dead_node_leave_and_form_the_next_round_without_it(
    aws_env: dict[str, str], bucket: str, state_writes: list[bool]
) -> None:
    handlers = [create_s3_handler(params(bucket, node, 2, 3)) for node in (1, 2, 3)]
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(lambda handler: handler.next_rendezvous(), handlers))
        handlers[2]._stop_heartbeats()  # dies, and its torchrun never comes back
        survivors = handlers[:2]
        with ThreadPoolExecutor(max_workers=2) as pool:  # torchrun's agents restart their round
            infos = list(pool.map(lambda handler: handler.next_rendezvous(), survivors))
        assert sorted(info.rank for info in infos) == [0, 1] and {info.world_size for info in infos} == {2}
        state = survivors[0]._state_holder.state
        assert state.round == 1 and set(state.participants) == {handler._this_node for handler in survivors}
        assert state_writes.count(True) == 2, "one write completes each round; leaves and joins are plain"
    finally:
        for handler in handlers:
            handler._stop_heartbeats()
