"""What the job's records say, as types: the states of `status.json` and the kinds of the `events/` log.

Every room that writes or reads a record (the agent, the cost room, the job commands, the local spot
cloud) names a state or a kind from here, so a misspelt one is a type error, not a record nobody reads.
Both are `StrEnum`s: a value is its own text in JSON and in event key names, so the records stay as they
were written and old ones still read. Standard library only.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """A job's state as status.json spells it."""

    STARTING = "STARTING"
    WAITING_FOR_LEASE = "WAITING_FOR_LEASE"
    RESTORING = "RESTORING"
    TRAINING = "TRAINING"
    STOPPING = "STOPPING"
    INTERRUPTED = "INTERRUPTED"
    DONE = "DONE"
    FAILED = "FAILED"
    # Stopped at its spending cap: neither done nor failed; a higher cap and capacity resume it.
    STOPPED_BY_BUDGET = "STOPPED_BY_BUDGET"


# A job in one of these runs no more: no agent changes its record again.
FINISHED = (JobState.DONE, JobState.FAILED, JobState.STOPPED_BY_BUDGET)


class EventKind(StrEnum):
    """The kind of an event in the job's append-only log (the end of its key name, its "kind" field)."""

    # An instance's life
    BOOT = "boot"  # how long the instance took to boot (agent/records/boot_events.py)
    START = "start"
    LEASE_WAIT = "lease_wait"
    RESUME = "resume"
    REGION_RESTORE = "region_restore"  # a start restored the job's newest step from another region's bucket
    FIRST_STEP = "first_step"
    SET_ASIDE = "set_aside"  # saves above the newest step in S3, moved out of the command's way
    CHECKPOINT = "checkpoint"
    WARNING = "warning"
    UPLOAD_FAILING = "upload_failing"  # checkpoint uploads keep failing, once per cause
    NOT_BIT_IDENTICAL = "not_bit_identical"  # a resume that cannot end bit-identical
    FAILURE = "failure"  # the command failed; the agent restarts it while the budget lasts
    MARKET = "market"  # the deadline policy moved the job between spot and on-demand
    REGION = "region"  # the regions controller moved the job to another region (capacity/region_controller.py)
    INTERRUPTION = "interruption"
    # A round of several nodes
    ROUND = "round"
    ROUND_RESUME = "round_resume"
    ROUND_ENDED = "round_ended"
    ABANDONED = "abandoned"  # a sharded step given up before it was published
    # The job's end
    DONE = "done"
    FAILED = "failed"
    BUDGET = "budget"  # stopped at its spending cap
    FINAL_OUTPUTS = "final_outputs"  # what a finished command left beside its checkpoints, and where it went
    # What the user did (`spot-trainer pause` / `resume`)
    PAUSED = "paused"
    RESUMED = "resumed"


# The events that end a job; an instance's own end is one of them or its interruption.
JOB_ENDINGS = (EventKind.DONE, EventKind.FAILED, EventKind.BUDGET)
