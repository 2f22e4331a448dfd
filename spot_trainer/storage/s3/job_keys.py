"""Where a job's records lie in its bucket, under `<job>/`: the one spelling every room uses.

  latest.json                                 the newest published checkpoint {"step", "key", "lease_token", …}
  checkpoints/step-<N:08d>/<files>            one checkpoint's objects
  checkpoints/step-<N:08d>/MANIFEST.json      written after every object is confirmed
  checkpoints/step-<N:08d>/saves/<save>/…     a step DCP wrote in shards on several nodes: each save's objects
  checkpoints/step-<N:08d>/parts/<save>/<tag>/<instance>.json
                                              each node's part record of that save (its tag: metadata,
                                              coordinator.<ranks> or ranks.<ranks>)
  checkpoints/step-<N:08d>/SETTLED-<save>.json  the one node that publishes or abandons that save
  lease.json                                  the single writer's lease
  status.json                                 the job's state, for `status`, the console and the watch
  events/<utc stamp>-<who>-<kind>.json        what happened, in time order
  instances/<instance id>.json                each instance's record, for its cost
  rendezvous/<run id>/                        several nodes' rendezvous
  budget-stops/usd-<cap>.json                 the first node's record of a stop at that cap
  final/<files>                               what a finished command left beside its checkpoints
  bootstrap/<instance id>.log                 the log of a bootstrap that failed (user data writes it)

The capacity watch (capacity/watch.py) runs as inline Lambda code with no package of ours to import:
it spells status.json, instances/ and events/ itself, and a test holds them to these.
"""

from __future__ import annotations

from datetime import UTC, datetime

LATEST = "latest.json"
LEASE = "lease.json"
STATUS = "status.json"
MANIFEST = "MANIFEST.json"
CHECKPOINTS = "checkpoints/"
SAVES = "saves/"  # within a sharded step
PARTS = "parts/"  # within a sharded step
SETTLED = "SETTLED-"  # within a sharded step
EVENTS = "events/"
INSTANCES = "instances/"
RENDEZVOUS = "rendezvous/"
BUDGET_STOPS = "budget-stops/"
FINAL = "final/"


def job_key(job: str, name: str) -> str:
    return f"{job.strip('/')}/{name}"


def utc_stamp(epoch: float) -> str:
    """Sorts as it happened: events are listed by key, so their names carry the time first."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def checkpoint_prefix(step: int) -> str:
    return f"{CHECKPOINTS}step-{step:08d}/"


def save_folder(identity: str) -> str:
    """A save's folder, named by the start of its `.metadata` identity."""
    return identity[:16]


def save_objects(identity: str) -> str:
    """Where a save's objects lie, within its step's prefix."""
    return f"{SAVES}{save_folder(identity)}/"


def part_record(save: str, tag: str, instance: str) -> str:
    """A node's part record, within its step's prefix (`save`: the save's folder, `tag`: its tag and ranks)."""
    return f"{PARTS}{save}/{tag}/{instance}.json"


def settled_record(step: int, identity: str) -> str:
    return f"{checkpoint_prefix(step)}{SETTLED}{identity}.json"


def event_name(epoch: float, who: str, kind: str) -> str:
    return f"{EVENTS}{utc_stamp(epoch)}-{who}-{kind}.json"


def event_kind_suffix(kind: str) -> str:
    return f"-{kind}.json"


def instance_record(instance: str) -> str:
    return f"{INSTANCES}{instance}.json"


def rendezvous_prefix(run_id: str) -> str:
    return f"{RENDEZVOUS}{run_id}"


def budget_stop(budget_usd: float) -> str:
    """A raised cap is a new name, so its own stop is recorded again."""
    return f"{BUDGET_STOPS}usd-{budget_usd:.6f}.json"
