"""The agent's own Auto Scaling group: scaling it to zero when the job ends, and the termination
lifecycle hook. A scaled-in instance waits in Terminating:Wait until its agent has the last
checkpoint in S3, then the agent lets it go by completing the lifecycle action."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .aws_clients import AutoScalingClient
from .imds import ImdsClient

TERMINATED = "Terminated"  # IMDS autoscaling/target-lifecycle-state once scale-in has chosen us
SCALE_IN_WAIT_SECONDS = 60.0  # after our own scale to zero, for the group to pick this instance


@dataclass
class OwnGroup:
    group_name: str  # empty: not in a group (a laptop, a test); every call is then a no-op
    hook_name: str
    instance_id: str
    imds: ImdsClient
    autoscaling: AutoScalingClient
    log: Callable[[str], None]

    def scale_to_zero(self) -> None:
        """The job is over (done or failed for good): no instance should keep running."""
        if not self.group_name:
            return
        try:
            self.autoscaling.set_desired_capacity(
                AutoScalingGroupName=self.group_name, DesiredCapacity=0, HonorCooldown=False
            )
            self.log(f"set desired capacity of {self.group_name} to 0")
        except Exception as error:
            self.log(f"could not scale {self.group_name} to 0: {error}")

    def release(self, wait_seconds: float = 0.0, poll_seconds: float = 1.0,
                stop: threading.Event | None = None) -> bool:
        """Complete the lifecycle action once this instance is being terminated, waiting up to
        `wait_seconds` for that. False when there was nothing to complete or it failed (the hook's
        timeout then completes it: termination is delayed, never blocked)."""
        if not (self.hook_name and self.group_name):
            return False
        deadline = time.monotonic() + wait_seconds
        try:
            while (self.imds.target_lifecycle_state() or "") != TERMINATED:
                if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                    return False
                time.sleep(poll_seconds)
            self.autoscaling.complete_lifecycle_action(
                LifecycleHookName=self.hook_name, AutoScalingGroupName=self.group_name,
                LifecycleActionResult="CONTINUE", InstanceId=self.instance_id,
            )
        except Exception as error:
            self.log(f"could not complete lifecycle action {self.hook_name}: {error}")
            return False
        self.log(f"completed lifecycle action {self.hook_name}")
        return True
