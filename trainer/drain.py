"""The termination lifecycle hook: a scaled-in instance waits in Terminating:Wait until its agent has
the last checkpoint in S3, then the agent lets it go by completing the lifecycle action."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TERMINATED = "Terminated"  # IMDS autoscaling/target-lifecycle-state once scale-in has chosen us
SCALE_IN_WAIT_SECONDS = 60.0  # after our own scale to zero, for the group to pick this instance


@dataclass
class DrainHook:
    hook_name: str
    group_name: str
    instance_id: str
    imds: Any  # trainer.imds.ImdsClient
    autoscaling: Any  # boto3 "autoscaling" client
    log: Callable[[str], None]

    @property
    def enabled(self) -> bool:
        return bool(self.hook_name and self.group_name)

    def release(self, wait_seconds: float = 0.0, poll_seconds: float = 1.0,
                stop: threading.Event | None = None) -> bool:
        """Complete the lifecycle action once this instance is being terminated, waiting up to
        `wait_seconds` for that. False when there was nothing to complete or it failed (the hook's
        timeout then completes it: termination is delayed, never blocked)."""
        if not self.enabled:
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
