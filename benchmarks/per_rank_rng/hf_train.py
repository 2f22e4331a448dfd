"""An HF Trainer script (GPT-2 with its default dropout of 0.1) for benchmarks/rng_per_rank.py, run
under torchrun. The Trainer is used as shipped; forward hooks only record, per rank, a digest of each
training batch and its loss, so that the data order and the dropout masks of two runs can be compared.

    torchrun --nproc_per_node 2 hf_train.py RUN_DIR --max-steps N --save-steps K [--resume-from CKPT]

Writes into RUN_DIR: checkpoint-<K>/ (the Trainer's), records_<rank>.json, and from rank 0
metrics.json and final.pt (the trained weights).
"""

import hashlib
import os

import torch
from run_files import run_arguments, write_run
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed


class Tokens(torch.utils.data.Dataset):
    def __init__(self, rows: int, seed: int) -> None:
        self.ids = torch.randint(0, 128, (rows, 32), generator=torch.Generator().manual_seed(seed))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def record_training_batches(model: torch.nn.Module, records: list[dict]) -> None:
    """Append {batch digest, loss} for every training forward (one per step: no accumulation)."""

    def after_forward(module, args, kwargs, output) -> None:
        if module.training:
            digest = hashlib.sha1(kwargs["input_ids"].numpy().tobytes()).hexdigest()[:12]
            records.append({"batch": digest, "loss": output.loss.item()})

    model.register_forward_hook(after_forward, with_kwargs=True)


def main() -> None:
    args = run_arguments(__doc__.split("\n")[0]).parse_args()
    rank = int(os.environ.get("RANK", "0"))

    set_seed(0)  # the same initial weights in every invocation, as the HF examples do
    model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=32, n_embd=64, n_layer=2, n_head=2))
    records: list[dict] = []
    record_training_batches(model, records)
    training = TrainingArguments(output_dir=str(args.run_dir), max_steps=args.max_steps, save_steps=args.save_steps,
                                 per_device_train_batch_size=8, per_device_eval_batch_size=32, learning_rate=1e-3,
                                 logging_steps=1, report_to=[], use_cpu=True, seed=0, ddp_backend="gloo")
    trainer = Trainer(model=model, args=training, train_dataset=Tokens(256, seed=0), eval_dataset=Tokens(64, seed=1))
    trainer.train(resume_from_checkpoint=args.resume_from)
    # Losses with dropout off: on held-out rows, and on the training rows themselves.
    metrics = {**trainer.evaluate(), **trainer.evaluate(trainer.train_dataset, metric_key_prefix="train")}
    write_run(args.run_dir, rank, records, metrics, model.state_dict())


if __name__ == "__main__":
    main()
