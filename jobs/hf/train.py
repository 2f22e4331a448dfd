"""A plain Hugging Face Trainer script: a tiny GPT-2 on synthetic tokens, CPU-sized.

Nothing in it knows Spot Trainer except where it saves: output_dir is $CHECKPOINT_DIR, and it
resumes the way the transformers examples do (get_last_checkpoint). Run under the agent, every
checkpoint-N it saves reaches S3 and a replacement instance resumes from the newest.
"""

import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

STEPS = int(os.environ.get("HF_STEPS", "60"))
SAVE_STEPS = int(os.environ.get("HF_SAVE_STEPS", "10"))


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
    trainer = Trainer(model=model, args=args, train_dataset=Tokens())
    last = get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
    print(f"resuming from {last}" if last else "starting fresh", flush=True)
    trainer.train(resume_from_checkpoint=last)
    print(f"finished at global step {trainer.state.global_step}", flush=True)


if __name__ == "__main__":
    main()
