"""A world of several nodes in a job of several regions publishes only while the job is placed in its region.

Several nodes hold no lease (the rendezvous and step fencing replace it), so the job's one lease cannot keep a
world left in a region the job moved from from publishing. The regions controller writes the move into home's
`regions.json` before the new region's group launches; every node reads it before each publish, so once a world
in the new region could have restored anything, the old one publishes nothing more: there is one lineage of
steps. A record S3 does not answer leaves the publish be (the move is rare, a failed read is not), said in a line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ...capacity.regions.place_record import RECORD_NAME
from ...storage.steps.remote import RemoteStore, RemoteStoreError

log = logging.getLogger(__name__)


@dataclass
class RegionFence:
    home: RemoteStore  # the job's store in its home region, which holds regions.json
    home_region: str
    region: str  # where this node runs
    say: Callable[[str], None]  # the agent's log: the fence is said once
    _said: bool = field(default=False, init=False)

    def why_fenced(self) -> str:
        """'' while the job is placed here (before the controller's first record: in home, where it deploys)."""
        try:
            record = self.home.get_json(RECORD_NAME)
        except (RemoteStoreError, ValueError) as error:
            log.warning("%s in s3://%s could not be read (%s): publishing as placed", RECORD_NAME, self.home.bucket,
                        error)
            return ""
        active = str(record.get("active") or self.home_region) if record is not None else self.home_region
        if active == self.region:
            return ""
        why = f"the job moved to {active}: a world left in {self.region} publishes nothing more"
        if not self._said:
            self._said = True
            self.say(f"{why} (home's {RECORD_NAME}); its group is scaled in by the regions controller")
        return why
