"""A plain torchrun DDP script, as people write them with no thought of spot instances: a small model
on synthetic data, rank 0 saves `ckpt_<step>.pt` into $CHECKPOINT_DIR every SAVE_EVERY steps (written
aside, then renamed), every rank loads the newest at start, rank 0 prints its loss now and then. No
signal handling, no import of Spot Trainer: under the agent a lost node is a new round and every round
starts from the step published in S3 (passed in $CHECKPOINT_DIR)."""

import os
import re
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

STEPS = int(os.environ.get("DDP_STEPS", "2000"))
SAVE_EVERY = int(os.environ.get("DDP_SAVE_EVERY", "100"))
STEP_SECONDS = float(os.environ.get("DDP_STEP_SECONDS", "0"))  # a pace, for the local spot cloud's demo


def newest_checkpoint(folder: Path) -> Path | None:
    found = [(int(m.group(1)), path) for path in folder.glob("ckpt_*.pt")
             if (m := re.fullmatch(r"ckpt_(\d+)\.pt", path.name))]
    return max(found)[1] if found else None


def main() -> None:
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                                        torch.nn.Linear(64, 1)).to(device))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    folder = Path(os.environ.get("CHECKPOINT_DIR", "checkpoints"))
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    if (newest := newest_checkpoint(folder)) is not None:
        state = torch.load(newest, map_location=device, weights_only=True)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
    generator = torch.Generator().manual_seed(dist.get_rank())
    for step in range(start + 1, STEPS + 1):
        inputs = torch.randn(64, 32, generator=generator).to(device)
        loss = (model(inputs) - inputs.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(STEP_SECONDS)
        if dist.get_rank() == 0 and step % SAVE_EVERY == 0:
            aside = folder / f".ckpt_{step}.pt.tmp"
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, aside)
            os.replace(aside, folder / f"ckpt_{step}.pt")
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
