"""A plain PyTorch training script that resumes through the Spot Trainer contract.

It knows nothing of Spot Trainer: it reads RESUME_FROM / CHECKPOINT_DIR, writes step-N files by
write-then-rename, saves on SIGTERM and exits 0 when done.
"""

import os
import signal
import sys
from pathlib import Path

import torch

STEPS, EVERY = int(os.environ.get("STEPS", "500")), 50
stop = False
signal.signal(signal.SIGTERM, lambda *_: globals().update(stop=True))

ckpt_dir = Path(os.environ.get("CHECKPOINT_DIR", "checkpoints"))
ckpt_dir.mkdir(parents=True, exist_ok=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
if os.environ.get("RESUME_FROM"):
    state = torch.load(os.environ["RESUME_FROM"], weights_only=False)
    model.load_state_dict(state["model"]), opt.load_state_dict(state["opt"])
    torch.set_rng_state(state["rng"])
    step = state["step"]


def save(step: int) -> None:
    tmp = ckpt_dir / f".step-{step}.tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": torch.get_rng_state(), "step": step}, tmp)
    os.replace(tmp, ckpt_dir / f"step-{step}")


while step < STEPS:
    x = torch.randn(32, 16)
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    opt.zero_grad(), loss.backward(), opt.step()
    step += 1
    if step % EVERY == 0 or step == STEPS or stop:
        save(step)
    if stop:
        sys.exit(75)
print(f"done at step {step}")
