"""`pause` and `resume`: the group to zero and back to the job's nodes; nothing deleted.

Setting the desired capacity to 0 puts every instance through the group's termination hook: each agent
sees `autoscaling/target-lifecycle-state` say Terminated and, as on a spot notice, has its command save,
uploads that checkpoint and completes the hook (spot_trainer/agent/watches/notice_watch.py). Resuming restores the
newest published checkpoint as after any interruption.
"""

from __future__ import annotations

from typing import Any

from ..agent.records.status import STATUS_NAME
from ..storage.record_kinds import EventKind, JobState
from ..storage.steps.remote import RemoteStore
from .aws_access import aws_errors
from .group_state import GroupState, read_group, set_desired
from .job_stack import JobStack
from .problem import JobProblem

FINISHED = (JobState.DONE, JobState.FAILED)


def job_state(store: RemoteStore) -> str:
    with aws_errors(f"cannot read s3://{store.bucket}/{store.key(STATUS_NAME)}"):
        status = store.read_record(STATUS_NAME) or {}
    return str(status.get("state", ""))


def pause(s3: Any, autoscaling: Any, job: JobStack) -> str:
    """The group to 0 once the pause is recorded; what happens next, in a line."""
    store = RemoteStore(s3, job.bucket, job.job, instance="user")
    group = read_group(autoscaling, job.group)
    if (state := job_state(store)) in FINISHED:
        raise JobProblem(f"job {job.job!r} is {state}: there is nothing to pause", 1)
    if group.paused:
        raise JobProblem(f"job {job.job!r} is already paused (its group wants 0 instances); "
                         f"`spot-trainer resume --job {job.job}` starts it again", 1)
    with aws_errors(f"cannot record the pause in s3://{job.bucket}/{job.job}/"):
        store.append_event(EventKind.PAUSED, nodes=group.desired)
    set_desired(autoscaling, job.group, 0)
    return (f"pausing job {job.job!r}: {group.desired} node(s) save and upload their step, then the group is at 0; "
            f"`spot-trainer resume --job {job.job}` goes on from there")


def resume(s3: Any, autoscaling: Any, job: JobStack) -> str:
    """The group back to its most (the job's nodes) once the resume is recorded; said in a line."""
    store = RemoteStore(s3, job.bucket, job.job, instance="user")
    group = read_group(autoscaling, job.group)
    if (state := job_state(store)) in FINISHED:
        raise JobProblem(f"job {job.job!r} is {state}: there is nothing to resume", 1)
    if not group.paused:
        raise JobProblem(f"job {job.job!r} is not paused: its group wants {group.desired} instance(s)", 1)
    with aws_errors(f"cannot record the resume in s3://{job.bucket}/{job.job}/"):
        store.append_event(EventKind.RESUMED, nodes=group.most)
    set_desired(autoscaling, job.group, group.most)
    return (f"resuming job {job.job!r}: its group wants {group.most} instance(s) again; training goes on from "
            f"the newest checkpoint")


def group_wish(s3: Any, autoscaling: Any, job: JobStack) -> str:
    """For `status`: what the job's group wants, and how to go on only where `resume` would."""
    return wish_line(read_group(autoscaling, job.group), job.job, job_state(RemoteStore(s3, job.bucket, job.job,
                                                                                        instance="user")))


def wish_line(group: GroupState, job: str, state: str) -> str:
    if not group.paused:
        return f"group: wants {group.desired} of at most {group.most} instance(s), {group.running} in it"
    if state in FINISHED:  # the job took its group to zero itself; `resume` answers that it is finished
        return f"group: wants 0 instances (the job is {state})"
    if state == JobState.STOPPED_BY_BUDGET:
        return (f"group: wants 0 instances (stopped at its budget: raise BudgetUSD, then "
                f"`spot-trainer resume --job {job}` goes on)")
    return f"paused: the group wants 0 instances (`spot-trainer resume --job {job}` goes on)"
