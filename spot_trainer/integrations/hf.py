"""Hugging Face Trainer: `Trainer(..., callbacks=[SpotTrainerCallback()])`.

On the agent's stop signal the step in flight finishes, the Trainer saves `checkpoint-N` into its
output_dir exactly as at a `save_steps` boundary (the agent uploads it once trainer_state.json is
written) and the process exits with 128 + the signal number: a script's code after `train()`
(saving or pushing a "final" model) must not run on a half-trained model. Without the callback,
the Trainer dies on SIGTERM and the job redoes the steps since its last save. Under torchrun the
ranks decide together (world_agreement.py): a notice to one node stops every rank at the same step,
and ranks that resumed from different checkpoints start a new round from the newest.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ..progress import StepLines, emit
from .stop_request import StopRequest
from .world_agreement import EX_NEW_ROUND, any_rank, in_world, step_range


class SpotTrainerCallback(TrainerCallback):
    def __init__(self) -> None:
        self.stop = StopRequest.for_agent()
        self.steps = StepLines()
        self.stopping = False  # this rank, or another of its world, was told to stop

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        self.stop.install()
        lowest, highest = step_range(state.global_step, args.device)
        if lowest != highest:
            # Ranks that load different checkpoints would train apart: all leave, and the next round
            # starts from the newest, which the agents fetch from S3 first.
            emit("group_stop", step=highest, rank=args.process_index)
            emit("peer_lost", rank=args.process_index,
                 reason=f"ranks resumed from steps {lowest} to {highest}: a new round starts from {highest}")
            raise SystemExit(EX_NEW_ROUND)
        emit("resumed" if state.global_step else "started", step=state.global_step)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        self.steps.step(state.global_step)
        if any_rank(self.stop.received, args.device):
            self.stopping = True
            control.should_save = True
            control.should_training_stop = True

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        loss = (logs or {}).get("loss")
        if isinstance(loss, (int, float)):
            emit("step", step=state.global_step, loss=float(loss))

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        if not self.stopping:
            emit("checkpoint", step=state.global_step)
            return
        if in_world():  # every agent of the world waits for this step to reach S3 before the next round
            emit("group_stop", step=state.global_step, rank=args.process_index)
        if state.is_world_process_zero:
            emit("emergency_checkpoint", step=state.global_step, signal=self.stop.signum.name)
        raise SystemExit(self.stop.exit_code)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        emit("done", step=state.global_step)
