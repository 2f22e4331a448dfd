"""Accelerate (a loop of your own; the diffusers training scripts): one line where the loop counts a step.

    from spot_trainer.integrations.accelerate import save_on_notice
    ...
            global_step += 1
            save_on_notice(accelerator, f"{args.output_dir}/checkpoint-{global_step}", global_step)

An Accelerate loop has no callbacks, so the loop calls this after each optimizer step. On the agent's
stop signal the step in flight finishes, `accelerator.save_state` saves it where the loop's own saves
go (the agent uploads the folder once Accelerate's files in it are whole), and the process exits with
128 + the signal number, so code after the loop (saving or pushing a "final" model) does not run on a
half-trained model. Under torchrun the ranks decide together (world_agreement.py): a notice to one
node stops every rank at the same step. Without the line a notice costs the steps since the loop's
last save.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..progress import StepLines, emit
from .stop_request import StopRequest
from .world_agreement import any_rank, in_world

if TYPE_CHECKING:
    from accelerate import Accelerator


class NoticeSaver:
    """The stop signal, handled from the first step on: a notice while the script loads its model or
    data ends it at once (nothing new to save), as without the line."""

    def __init__(self) -> None:
        self.stop = StopRequest.for_agent()
        self.steps = StepLines()
        self.installed = False

    def __call__(self, accelerator: Accelerator, path: str | os.PathLike[str], step: int) -> None:
        if not self.installed:
            self.stop.install()
            self.installed = True
        self.steps.step(step)
        # Looked at before the ranks agree, so before any emergency save has made the folder. The loop's
        # own save may come from rank 0 alone (the diffusers scripts save under is_main_process), so
        # any rank that sees it decides for all: the model and optimizer are not written twice while
        # the agent may be uploading them.
        saved_by_the_loop = Path(path).exists()
        if not any_rank(self.stop.received, accelerator.device):
            return
        if not any_rank(saved_by_the_loop, accelerator.device):
            accelerator.save_state(os.fspath(path))  # every rank takes part; each writes its own RNG state
        accelerator.wait_for_everyone()
        if in_world():  # every agent of the world waits for this step to reach S3 before the next round
            emit("group_stop", step=step, rank=accelerator.process_index)
        if accelerator.is_main_process:
            emit("emergency_checkpoint", step=step, signal=self.stop.signum.name)
        raise SystemExit(self.stop.exit_code)


save_on_notice = NoticeSaver()
