"""A round's rank 0 listens on a port below the kernel's ephemeral range, where no outgoing connection of
the node (S3 calls, rendezvous heartbeats) can take it in the moments before it binds."""

from __future__ import annotations

import socket
from contextlib import closing

import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import api as rendezvous_api

from spot_trainer.distributed.launch import master_ports_below_the_ephemeral_range
from spot_trainer.distributed.master_port import LISTEN_FLOOR, ephemeral_range, master_port

EPHEMERAL = (32768, 60999)  # Linux's default


def torch_pick() -> int:
    return 45000  # stands for torch's own: an ephemeral port


def test_the_port_lies_between_the_floor_and_the_ephemeral_range_and_is_free() -> None:
    for _ in range(20):
        port = master_port(torch_pick, ephemeral=EPHEMERAL)
        assert LISTEN_FLOOR <= port < EPHEMERAL[0]
        with closing(socket.socket()) as listener:
            listener.bind(("", port))  # free when chosen


def test_a_port_something_listens_on_is_passed_over() -> None:
    listening = set(range(LISTEN_FLOOR, EPHEMERAL[0], 3))  # a third of them taken
    for _ in range(20):
        port = master_port(torch_pick, ephemeral=EPHEMERAL, is_free=lambda port: port not in listening)
        assert port not in listening and LISTEN_FLOOR <= port < EPHEMERAL[0]


def test_torch_picks_where_the_range_leaves_no_room_or_nothing_is_free() -> None:
    assert master_port(torch_pick, ephemeral=(LISTEN_FLOOR, 60999)) == 45000
    assert master_port(torch_pick, ephemeral=EPHEMERAL, is_free=lambda port: False) == 45000


def test_the_kernel_range_is_read_and_an_unreadable_one_is_none(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "range").write_text("32768\t60999\n")
    assert ephemeral_range(tmp_path / "range") == (32768, 60999)
    assert ephemeral_range(tmp_path / "missing") is None
    (tmp_path / "odd").write_text("many\n")
    assert ephemeral_range(tmp_path / "odd") is None


def test_a_round_publishes_such_a_port_through_torchs_own_rendezvous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rendezvous_api, "get_free_port", rendezvous_api.get_free_port)  # undone after the test
    master_ports_below_the_ephemeral_range()
    info = rendezvous_api.RendezvousStoreInfo.build(0, dist.HashStore(), "127.0.0.1")
    low = (ephemeral_range() or EPHEMERAL)[0]
    assert info.master_addr == "127.0.0.1" and LISTEN_FLOOR <= info.master_port < low


@pytest.mark.parametrize("name", ["get_free_port", "_get_free_port", None])
def test_each_torch_keeps_launching_whatever_it_calls_its_port_pick(name: str | None,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # torch 2.5 imported it as _get_free_port, older ones had no such pick: the launcher must not fail there.
    for present in ("get_free_port", "_get_free_port"):
        monkeypatch.delattr(rendezvous_api, present, raising=False)
    if name:
        monkeypatch.setattr(rendezvous_api, name, torch_pick, raising=False)
    assert master_ports_below_the_ephemeral_range() is (name is not None)
    if name:
        assert LISTEN_FLOOR <= getattr(rendezvous_api, name)() < (ephemeral_range() or EPHEMERAL)[0]
