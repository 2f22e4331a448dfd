"""Keeps the job lease renewed from a background thread for as long as the agent holds it.

Renewal must not depend on the poll loop: while the agent waits out the grace period for an
emergency checkpoint and uploads it, the loop is blocked, yet the lease must stay ours or the
upload would be refused as coming from a stale holder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...storage.s3.lease import Lease
from ..records.log_lines import agent_line


class LeaseKeeper:
    def __init__(
        self,
        lease: Lease,
        ttl_seconds: float,
        log: Callable[[str], None] = agent_line,
    ) -> None:
        self.lease, self._log = lease, log
        self._every = ttl_seconds / 3  # two renewals may fail (throttling, a slow moment) before expiry
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-renewal", daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                renewed = self.lease.renew()
            except Exception as error:  # S3 briefly unreachable: try again; expiry decides
                self._log(f"lease renewal failed ({error}); retrying")
                if self.lease.held():
                    continue
                renewed = False
            if not renewed:
                self.lost.set()
                return

    def release(self) -> None:
        """Stop renewing and hand the lease back."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if not self.lost.is_set():
            try:
                self.lease.release()
            except Exception as error:  # it expires on its own within the TTL
                self._log(f"could not release the lease ({error}); it expires by itself")
