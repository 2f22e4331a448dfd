"""Where a job's records lie in its bucket, under `<job>/`: the one spelling every room uses.

  latest.json                                 the newest published checkpoint {"step", "key", "lease_token", …}
  checkpoints/step-<N:08d>/<files>            one checkpoint's objects
  checkpoints/step-<N:08d>/MANIFEST.json      written after every object is confirmed
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
