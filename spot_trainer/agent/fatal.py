"""When the agent cannot run at all: bad settings, an unusable checkpoint directory, a secret that cannot
be read, a disk too small for the checkpoint, a bug, or the same failure at every start (failed_starts.py).

systemd does not restart an agent that exits 2 or 3, so without this the instance would sit there
billing while status.json still said TRAINING. Every replacement would fail the same way, so the job
ends: FAILED with the reason where the job's status lives, a notification on the job's topic, and its
own group scaled to zero, as far as the settings that could be read allow. Checkpoints are kept.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Mapping
from typing import Any

import boto3

from ..storage.record_kinds import EventKind
from ..storage.s3.job_records import JobRecords
from ..storage.s3.s3client import client_config, s3_client
from ..storage.steps.checkpoint_restore import LOCAL_DISK_ERRORS
from .failed_record import failed_record
from .instance.imds import ImdsClient
from .instance.own_group import OwnGroup
from .records import status as states
from .records.notify import Notifier

REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")


def end_job_as_failed(env: Mapping[str, str], reason: str, log: Callable[[str], None]) -> None:
    """Best effort, never raises: each step names what it could not do."""
    bucket, job = env.get("SPOT_BUCKET", "").strip(), env.get("SPOT_JOB", "").strip()
    named_region = env.get("SPOT_REGION", "").strip()
    region = named_region if REGION.match(named_region) else None  # a broken value must not stop the clean-up
    instance = env.get("SPOT_INSTANCE_ID", "").strip() or "unknown"
    if bucket and job:
        try:
            record_failed(JobRecords(s3_client(region=region, max_attempts=3), bucket, job, instance=instance),
                          reason)
            log(f"recorded FAILED in s3://{bucket}/{job}/{states.STATUS_NAME}")
        except Exception as error:
            log(f"could not record FAILED in s3://{bucket}/{job}: {_first_line(error)}")
    topic = env.get("SPOT_NOTIFY_TOPIC", "").strip()
    if topic and job:
        notify_failed(topic, job, reason, region, log)
    group = env.get("SPOT_ASG_NAME", "").strip()
    if group:
        try:
            autoscaling = boto3.session.Session().client("autoscaling", region_name=region,
                                                         config=client_config(max_attempts=3))
        except Exception as error:
            log(f"could not scale {group} to 0: {_first_line(error)}")
            return
        OwnGroup(group, "", instance, ImdsClient(), autoscaling, log).scale_to_zero()


def notify_failed(topic: str, job: str, reason: str, region: str | None, log: Callable[[str], None]) -> None:
    """The `failed` message on the job's topic, worded as the agent's own (notify.py)."""
    try:
        sns = boto3.session.Session().client("sns", region_name=region, config=client_config(max_attempts=3))
        Notifier(topic, sns, job, log).event(EventKind.FAILED, {"reason": reason})
    except Exception as error:
        log(f"could not publish the failed notification: {_first_line(error)}")


def disk_error(error: BaseException) -> OSError | None:
    """The error of this instance's own disk (full, over quota, read-only, refused) behind `error`, if any:
    a replacement gets the same disk from the same launch template, so no restart mends it."""
    seen: BaseException | None = error
    for _ in range(10):  # causes chain a few deep; a cycle must not hang the agent's exit
        if seen is None:
            return None
        if isinstance(seen, OSError) and seen.errno in LOCAL_DISK_ERRORS:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def disk_fix(error: OSError) -> str:
    """What to change about a disk that refused the agent, the checkpoints in S3 being kept."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return ("this instance's disk is too small for it, and a replacement's is the same: raise capacity.volume_size "
                "(VolumeSize), then set the group's desired capacity back; the checkpoints in S3 are kept")
    return ("this instance's disk refuses the write, and a replacement's is set up the same way: fix "
            "run.checkpoint_dir or the image, then set the group's desired capacity back; the checkpoints in S3 "
            "are kept")


def record_failed(store: JobRecords, reason: str) -> None:
    """FAILED over the job's record, keeping its counters and progress."""
    previous: dict[str, Any] | None = store.read_record(states.STATUS_NAME)
    store.put_json(states.STATUS_NAME, failed_record(previous, store.job, store.instance, reason))
    store.append_event(EventKind.FAILED, reason=reason)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
