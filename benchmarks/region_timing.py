"""How long things take in the regions simulation (benchmarks/region_moves.py), at AWS's times, and each
move's time from capacity lost in the region it left to the first trained step in its target.

The simulation runs in one-minute ticks. Each time, and where it comes from:

- Spot interruption notice: AWS reclaims a spot instance 2 minutes after its notice, and the notice is
  best effort (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html).
  The instance stays InService until then, so the controller counts it running, and `region_wait` starts
  when it ends.
- The regions controller runs each minute: EventBridge `rate(1 minute)` (stacks/resources/regions_controller.py,
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rate-expressions.html). The move rule is
  asked at every tick.
- Failed launches: a group without spot capacity reports one failed scaling activity per try. AWS documents
  that the group keeps trying (https://docs.aws.amazon.com/autoscaling/ec2/userguide/asg-launch-spot-instances.html)
  and suspends launching once it has failed for over 24 hours
  (https://docs.aws.amazon.com/autoscaling/ec2/userguide/as-suspend-resume-processes.html). It does not
  document how often it tries, so the simulation assumes once a minute (`--launch-retry-minutes`), as the local
  spot cloud plays it (localcloud/moto_launches.py).
- Launch to user data: AWS documents no figure. Public measurements give about 25-30 s from RunInstances to
  SSH on general-purpose types (http://www.daemonology.net/blog/2021-08-12-EC2-boot-time-benchmarking.html);
  GPU images are larger, so the simulation assumes 2 minutes (`--launch-minutes`).
- User data to a running agent: 15.4-16.1 s measured (docs/benchmarks.md, the environment cache), so 1 minute
  (`--bootstrap-minutes`).
- Restore: the checkpoint at `--restore-gb-per-minute` (30 GB a minute, 500 MB/s), from its own region's
  bucket or across regions. AWS documents no per-instance S3 rate, so one rate serves both.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any


def start_minutes(launch: int, bootstrap: int, checkpoint_gb: float, gb_per_minute: float) -> int:
    """An instance's launch to its first step: the boot, then the checkpoint's restore (none before the first)."""
    return launch + bootstrap + math.ceil(checkpoint_gb / gb_per_minute)


@dataclass
class MoveTime:
    """One move: when capacity was lost in the region left (its instance's notice, or the minute it was found
    not launching), when the rule's trigger first held there (K failed launches or `region_wait`), when the
    move was made (later where moves back off or no region scored high enough) and why, when the target
    launched, and its first trained minute."""

    lost_at: int
    due_at: int
    moved_at: int
    reason: str
    launched_at: int | None = None
    first_step_at: int | None = None  # None: the job left the target, or ended, before training there

    @property
    def by_failures(self) -> bool:
        """The rule moved on failed launches, not on `region_wait`."""
        return "failed for capacity" in self.reason.split(";")[0]


def _spread(moves: list[MoveTime], bound: int) -> dict[str, Any]:
    """Capacity lost to first step: p50, p95 (nearest rank), max, the share within `bound`, and its parts' means."""
    values = sorted((move.first_step_at or 0) - move.lost_at for move in moves)  # all are ints
    if not values:
        return {"count": 0}
    return {"count": len(values), "p50_minutes": statistics.median_low(values),
            "p95_minutes": values[math.ceil(0.95 * len(values)) - 1], "max_minutes": values[-1],
            "within_bound_share": round(sum(value <= bound for value in values) / len(values), 4),
            "parts_mean_minutes": {
                "lost_to_due": round(statistics.fmean(m.due_at - m.lost_at for m in moves), 2),
                "due_to_move": round(statistics.fmean(m.moved_at - m.due_at for m in moves), 2),
                "move_to_launch": round(statistics.fmean((m.launched_at or 0) - m.moved_at for m in moves), 2),
                "launch_to_first_step": round(statistics.fmean((m.first_step_at or 0) - (m.launched_at or 0)
                                                               for m in moves), 2)}}


def move_times_summary(moves: list[MoveTime], bound: int) -> dict[str, Any]:
    """Over the moves whose target trained: all of them; those made as soon as the trigger held, to a target that
    launched at once (the rule's and AWS's times alone); and the move rule's moves by what triggered them."""
    reached = [move for move in moves if move.first_step_at is not None]
    prompt = [move for move in reached if move.due_at == move.moved_at == move.launched_at]
    return {"bound_minutes": bound, "moves": len(moves), "target_never_trained": len(moves) - len(reached),
            "all": _spread(reached, bound), "when_due_and_target_launched_at_once": _spread(prompt, bound),
            "by_trigger": {trigger: _spread([m for m in reached if m.reason and m.by_failures == failures], bound)
                           for trigger, failures in (("capacity_failures", True), ("region_wait", False))}}
