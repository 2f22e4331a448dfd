"""Whether a job's grace period fits in a spot notice. AWS reclaims a spot instance two minutes after
its notice whatever the instance is doing; only scale-in and rebalancing wait for the lifecycle hook.
A longer grace period deploys (it serves those two), and the synth says what a notice leaves of it.
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
"""

from __future__ import annotations

from spot_trainer.settings import AFTER_UPLOAD_SECONDS, NOTICE_SECONDS
from stacks.job.spec import JobSpec


def grace_warning(job: JobSpec) -> str | None:
    """One line when run.grace_seconds cannot be given in full on a spot notice, else None."""
    fits = NOTICE_SECONDS - AFTER_UPLOAD_SECONDS
    if job.run.grace_seconds <= fits:
        return None
    return (f"{job.source}: run.grace_seconds = {job.run.grace_seconds:g} cannot fit in a spot notice: AWS reclaims "
            f"the instance {NOTICE_SECONDS:g} s after it, so the command gets at most {fits:g} s less its "
            f"checkpoint's upload there; the full {job.run.grace_seconds:g} s apply to scale-in and rebalancing")
