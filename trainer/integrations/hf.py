"""Hugging Face Trainer: `Trainer(..., callbacks=[SpotTrainerCallback()])`.

On the agent's stop signal the step in flight finishes, the Trainer saves `checkpoint-N` into its
output_dir exactly as at a `save_steps` boundary (the agent uploads it once trainer_state.json is
written) and the process exits with 128 + the signal number: a script's code after `train()`
(saving or pushing a "final" model) must not run on a half-trained model. Without the callback,
the Trainer dies on SIGTERM and the job redoes the steps since its last save.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ..progress import StepLines, emit
from .stop_request import StopRequest


class SpotTrainerCallback(TrainerCallback):
    def __init__(self) -> None:
        self.stop = StopRequest.for_agent()
        self.steps = StepLines()

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        self.stop.install()
        emit("resumed" if state.global_step else "started", step=state.global_step)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        self.steps.step(state.global_step)
        if self.stop.received:
            control.should_save = True
            control.should_training_stop = True

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        loss = (logs or {}).get("loss")
        if isinstance(loss, (int, float)):
            emit("step", step=state.global_step, loss=float(loss))

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        if not self.stop.received:
            emit("checkpoint", step=state.global_step)
            return
        emit("emergency_checkpoint", step=state.global_step, signal=self.stop.signum.name)
        raise SystemExit(self.stop.exit_code)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        emit("done", step=state.global_step)
