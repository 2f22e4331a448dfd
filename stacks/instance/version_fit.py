"""What the chosen user data version can carry: a job file asking for more is refused at synth, naming the
field and the version that carries it. Read from the version table (userdata_versions.py), after the job
file's own checks (stacks/job/fields.py) made its JobSpec."""

from __future__ import annotations

from spot_trainer.settings import SETTINGS
from stacks.instance.user_data import available_versions
from stacks.instance.userdata_versions import SHIPPED_RUNTIME_IMPORT, userdata_version
from stacks.job.spec import CURRENT_USERDATA_VERSION, SHIPPED_TRAINER_PACKAGE, JobSpec, field_error


def check_version_fit(job: JobSpec) -> None:
    """Refuse a version that is not on disk, and what `job.userdata_version` cannot carry."""
    version = job.userdata_version
    if version not in available_versions():
        raise field_error("userdata_version", f"{version!r} not found (available: {', '.join(available_versions())})")
    supports = userdata_version(version)
    if supports.runtime_import != SHIPPED_RUNTIME_IMPORT and job.run.trainer_package == SHIPPED_TRAINER_PACKAGE:
        raise field_error("userdata_version", "v1 starts the runtime as `trainer`, which this checkout installs as "
                    f"`spot_trainer`: use {CURRENT_USERDATA_VERSION}, or pin run.trainer_package to 0.1.0")
    if supports.heredoc_header and any(c in job.run.setup for c in "\r\n"):
        # v1's header carries deploy-time values in here-documents: a line equal to their delimiter
        # would end one and run the rest as root at boot.
        raise field_error("run.setup", f"must be one line with user data {version} (its header carries values "
                          f"in here-documents): join the commands with &&, or use {CURRENT_USERDATA_VERSION}")
    if not supports.checkpoint_dir and job.run.checkpoint_dir:
        raise field_error("run.checkpoint_dir", "user data v1 always uses the agent's own folder: use "
                          f"{CURRENT_USERDATA_VERSION}")
    if not supports.multi_node and job.capacity.distributed:
        raise field_error("capacity.distributed", "user data v1 and spot-trainer 0.1 have no multi-node training: "
                    f"use {CURRENT_USERDATA_VERSION}")
    if job.schedule.budget_usd and not supports.budget:
        raise field_error("schedule.budget_usd", "user data v1's agent keeps no budget: use "
                          f"{CURRENT_USERDATA_VERSION}")
    if job.notify.restart_on_stall and (not supports.restart_on_stall or job.capacity.distributed):
        raise field_error("notify.restart_on_stall", "the agent restarts a hung command on single-node jobs with "
                          f"user data {CURRENT_USERDATA_VERSION}; several nodes keep the stall alarm alone")
    if supports.frozen_header is not None and len(job.capacity.regions) > 1:
        raise field_error("capacity.regions", f"user data {version} trains in the deploy region alone: use "
                          f"{CURRENT_USERDATA_VERSION}")
    _check_frozen_header(job)


def _check_frozen_header(job: JobSpec) -> None:
    """A setting written only when the job sets it (`header_when_set`) that a version's frozen header cannot
    carry would be dropped silently: refuse it instead."""
    version = job.userdata_version
    if (carried := userdata_version(version).frozen_header) is None:
        return
    for item in SETTINGS:
        if item.header_when_set and item.env not in carried and \
                getattr(getattr(job, item.section), item.key) != item.default:
            raise field_error(item.field, f"user data {version} does not carry it: use {CURRENT_USERDATA_VERSION}")
