"""The port a round's rank 0 listens on, chosen where no outgoing connection can take it.

torch elastic picks it by binding port 0 and closing the socket: an ephemeral port, which the kernel
hands to this node's next outgoing connection (the agent's S3 calls, the rendezvous heartbeats) as
readily as to anything else. Taken in the moments before rank 0 binds it, the round fails at
init_process_group with EADDRINUSE and counts as a failed round. Outgoing connections take their local
port only from `ip_local_port_range`; a port below it, free when checked, is lost only to another
listener. https://www.kernel.org/doc/Documentation/networking/ip-sysctl.txt (ip_local_port_range)
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_FLOOR = 20000  # above the well-known and most registered service ports a node may run
TRIES = 50


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int] | None:
    """The kernel's range for outgoing connections' local ports, or None where it cannot be read."""
    try:
        low, high = (int(word) for word in path.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def _free(port: int) -> bool:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def master_port(fallback: Callable[[], int], *, ephemeral: tuple[int, int] | None = None,
                is_free: Callable[[int], bool] = _free) -> int:
    """A free port between LISTEN_FLOOR and the ephemeral range, at random (two jobs on one host rarely
    meet); `fallback()` (torch's own pick) where the kernel's range leaves no such ports or none is free."""
    ephemeral = ephemeral if ephemeral is not None else ephemeral_range()
    if ephemeral is None or ephemeral[0] <= LISTEN_FLOOR + 1:
        return fallback()
    for port in random.sample(range(LISTEN_FLOOR, ephemeral[0]), k=min(TRIES, ephemeral[0] - LISTEN_FLOOR)):
        if is_free(port):
            return port
    return fallback()
