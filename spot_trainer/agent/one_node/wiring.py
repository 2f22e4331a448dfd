"""A node alone, built from what the agent hands every mode and the job's lease it trains under."""

from __future__ import annotations

from ...storage.s3.lease import Lease
from ..node.endings import Endings
from ..node.mode import NodeSetup
from ..node.restore import Restore
from .mode import OneNode


def build(setup: NodeSetup, lease: Lease) -> OneNode:
    endings = Endings(setup.config, setup.store, setup.telemetry, setup.group, setup.stop_requested)
    return OneNode(setup.config, lease, setup.telemetry, setup.notices, setup.stop_requested, setup.restore(Restore),
                   endings)
