"""An Accelerate training loop written the way the diffusers training scripts are (set_seed, prepare,
save_state every K steps, load_state and skip_first_batches on resume), with dropout, for
benchmarks/rng_per_rank.py, run under torchrun. --seedable-sampler shuffles each epoch from its number,
as Accelerate offers for a resume with the same batches. It records, per rank, a digest of each batch and its loss.

    torchrun --nproc_per_node 2 accelerate_train.py RUN_DIR --max-steps N --save-steps K \
        [--resume-from CKPT] [--seedable-sampler]

Writes into RUN_DIR: checkpoint-<K>/ (save_state's), records_<rank>.json, and from rank 0
metrics.json and final.pt (the trained weights).
"""

import hashlib
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, set_seed
from run_files import run_arguments, write_run
from torch.utils.data import DataLoader, TensorDataset


def rows(count: int, seed: int) -> TensorDataset:
    inputs = torch.randn(count, 16, generator=torch.Generator().manual_seed(seed))
    return TensorDataset(inputs, torch.sin(inputs).sum(dim=1, keepdim=True))


def mean_loss(model: torch.nn.Module, data: DataLoader, accelerator: Accelerator) -> float:
    """Mean squared error with dropout off, over every rank's share."""
    model.eval()
    total, count = torch.zeros(()), torch.zeros(())
    with torch.no_grad():
        for inputs, targets in data:
            total += torch.nn.functional.mse_loss(model(inputs), targets, reduction="sum")
            count += len(inputs)
    model.train()
    return (accelerator.reduce(total, "sum") / accelerator.reduce(count, "sum")).item()


def main() -> None:
    parser = run_arguments(__doc__.split("\n")[0])
    parser.add_argument("--seedable-sampler", action="store_true",
                        help="shuffle each epoch from seed + epoch (the diffusers scripts leave this off)")
    args = parser.parse_args()

    set_seed(0)
    accelerator = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(
        use_seedable_sampler=args.seedable_sampler))
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(64, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train = DataLoader(rows(512, seed=0), batch_size=16, shuffle=True)
    held_out = DataLoader(rows(128, seed=1), batch_size=64)
    model, optimizer, train, held_out = accelerator.prepare(model, optimizer, train, held_out)

    step = 0
    if args.resume_from:
        accelerator.load_state(args.resume_from)
        step = int(Path(args.resume_from).name.split("-")[1])
    records: list[dict] = []
    while step < args.max_steps:
        skip = step % len(train)
        train.set_epoch(step // len(train))  # with the seedable sampler, the epoch's order is resumed too
        for inputs, targets in accelerator.skip_first_batches(train, skip) if skip else train:
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            records.append({"batch": hashlib.sha1(inputs.numpy().tobytes()).hexdigest()[:12], "loss": loss.item()})
            if step % args.save_steps == 0:
                accelerator.save_state(str(args.run_dir / f"checkpoint-{step}"))
            if step >= args.max_steps:
                break

    metrics = {"eval_loss": mean_loss(model, held_out, accelerator), "train_loss": mean_loss(model, train, accelerator)}
    write_run(args.run_dir, accelerator.process_index, records, metrics,
              accelerator.unwrap_model(model).state_dict())


if __name__ == "__main__":
    main()
