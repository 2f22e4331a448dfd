"""A plain Hugging Face Trainer script: a tiny GPT-2 on synthetic tokens, CPU-sized.

It knows Spot Trainer only where it saves and in one callback: output_dir is $CHECKPOINT_DIR, it
resumes the way the transformers examples do (get_last_checkpoint), and SpotTrainerCallback saves
at the next step when the agent stops it (HF_CALLBACK=off runs it without, as an unmodified
script: then a notice costs the steps since the last save). Run under the agent, every
checkpoint-N reaches S3 and a replacement instance resumes from the newest.
"""

import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from spot_trainer.integrations.hf import SpotTrainerCallback

STEPS = int(os.environ.get("HF_STEPS", "60"))
SAVE_STEPS = int(os.environ.get("HF_SAVE_STEPS", "10"))
WITH_CALLBACK = os.environ.get("HF_CALLBACK", "on") != "off"


class Tokens(torch.utils.data.Dataset):
    """Deterministic synthetic token sequences (no download)."""

    def __init__(self, count: int = 512, length: int = 32, vocab: int = 128) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (count, length), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def main() -> None:
    output_dir = os.environ.get("CHECKPOINT_DIR", "checkpoints")
    model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2))
    args = TrainingArguments(
        output_dir=output_dir, max_steps=STEPS, save_steps=SAVE_STEPS, save_total_limit=3,
        per_device_train_batch_size=8, learning_rate=1e-3, logging_steps=SAVE_STEPS,
        report_to=[], use_cpu=True, seed=0, dataloader_num_workers=0,
    )
    callbacks = [SpotTrainerCallback()] if WITH_CALLBACK else []
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=callbacks)
    last = get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
    print(f"resuming from {last}" if last else "starting fresh", flush=True)
    trainer.train(resume_from_checkpoint=last)
    print(f"finished at global step {trainer.state.global_step}", flush=True)


if __name__ == "__main__":
    main()
