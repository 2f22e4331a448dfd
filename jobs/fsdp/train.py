"""An FSDP2 script of torchtitan's shape, as people write them with no thought of spot instances: every
layer `fully_shard`ed, every rank saves the model and optimizer with torch.distributed.checkpoint into
$CHECKPOINT_DIR/step-<N>/ every SAVE_EVERY steps (each rank its own shard, rank 0 the `.metadata`
last), and at start every rank loads the newest `step-<N>/` whose `.metadata` its disk holds, at
whatever world size this round has (DCP reshards). No signal handling, no import of Spot Trainer:
under the agent every node uploads its own shards, a step counts once all of them are in S3, and every
node of a round finds that whole step in $CHECKPOINT_DIR."""

import os
import re
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

STEPS = int(os.environ.get("FSDP_STEPS", "2000"))
SAVE_EVERY = int(os.environ.get("FSDP_SAVE_EVERY", "100"))
WIDTH = int(os.environ.get("FSDP_WIDTH", "256"))
STEP_SECONDS = float(os.environ.get("FSDP_STEP_SECONDS", "0"))  # a pace, for the local spot cloud's demo


def newest_step(folder: Path) -> int:
    found = [int(m.group(1)) for path in folder.glob("step-*/.metadata")
             if (m := re.fullmatch(r"step-(\d+)", path.parent.name))]
    return max(found, default=0)


def main() -> None:
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH) for _ in range(4))).to(device)
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    folder = Path(os.environ.get("CHECKPOINT_DIR", "checkpoints"))
    folder.mkdir(parents=True, exist_ok=True)
    start = newest_step(folder)
    if start:
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=str(folder / f"step-{start}"))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    generator = torch.Generator().manual_seed(dist.get_rank())
    for step in range(start + 1, STEPS + 1):
        inputs = torch.randn(64, WIDTH, generator=generator).to(device)
        loss = (model(inputs) - inputs).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(STEP_SECONDS)
        if step % SAVE_EVERY == 0:
            model_state, optimizer_state = get_state_dict(model, optimizer)
            dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(folder / f"step-{step}"))
            if dist.get_rank() == 0:
                print(f"step {step} loss {loss.item():.4f} (world {dist.get_world_size()})", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
