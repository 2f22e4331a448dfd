"""A plain Lightning script: a small MLP on synthetic data, CPU-sized.

It knows Spot Trainer only where it saves and in one callback: ModelCheckpoint writes into
$CHECKPOINT_DIR (its default file name carries the step) with save_last=True, the script resumes
the way the Lightning docs do it, with ckpt_path="last", and SpotCheckpoint saves at the next step
when the agent stops it (PL_CALLBACK=off runs it without, as an unmodified script: then a notice
costs the steps since the last save).
"""

import os

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar
from torch.utils.data import DataLoader, TensorDataset

from spot_trainer.integrations.lightning import SpotCheckpoint

STEPS = int(os.environ.get("PL_STEPS", "60"))
SAVE_STEPS = int(os.environ.get("PL_SAVE_STEPS", "10"))
WITH_CALLBACK = os.environ.get("PL_CALLBACK", "on") != "off"
# Lightning's tqdm bar, its default where `rich` is not installed: it writes to stdout.
PROGRESS_BAR = [TQDMProgressBar()] if os.environ.get("PL_PROGRESS_BAR", "off") == "on" else []


class Regression(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        inputs, targets = batch
        loss = torch.nn.functional.mse_loss(self.net(inputs), targets)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def data() -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(4096, 16, generator=generator)
    targets = inputs.sum(dim=1, keepdim=True)
    return DataLoader(TensorDataset(inputs, targets), batch_size=32, shuffle=True, generator=generator)


def main() -> None:
    checkpoints = ModelCheckpoint(dirpath=os.environ.get("CHECKPOINT_DIR", "checkpoints"),
                                  every_n_train_steps=SAVE_STEPS, save_top_k=3, monitor="step",
                                  mode="max", save_last=True)
    L.seed_everything(0)
    callbacks = [checkpoints, *PROGRESS_BAR, SpotCheckpoint()] if WITH_CALLBACK else [checkpoints, *PROGRESS_BAR]
    # One process per node; under torchrun (distributed = true) the world is as many nodes as are up.
    trainer = L.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, callbacks=callbacks,
                        num_nodes=int(os.environ.get("WORLD_SIZE", "1")),
                        logger=False, enable_progress_bar=bool(PROGRESS_BAR), enable_model_summary=False)
    trainer.fit(Regression(), data(), ckpt_path="last")
    print(f"finished at global step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
