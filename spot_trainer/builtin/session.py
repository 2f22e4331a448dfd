"""What changes while the built-in trainer trains, as one resumable state dict."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..progress import emit
from .data import BatchOrder
from .group import SOLO, Group
from .platform_record import reasons_not_bit_identical
from .state import capture_rng, restore_rng, seed_everything


class TrainError(RuntimeError):
    """Training cannot start or go on; the message says why in one line."""


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Session:
    """Everything that changes while training; `state_dict` is the one resumable dict."""

    args: argparse.Namespace
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    order: BatchOrder
    step: int = 0
    group: Group = SOLO
    forward: torch.nn.Module | None = None  # the DDP wrapper of `model` under torchrun
    platform: dict[str, str] = field(default_factory=dict)  # what the steps are computed on

    def identity(self) -> dict[str, Any]:
        return {"model": self.args.model, "width": self.args.width, "context": self.args.context}

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "step": self.step,
            "data": self.order.state_dict(),
            "rng": capture_rng(),
            # Every rank's generators (a collective: all ranks build the state together).
            **({"rng_ranks": self.group.gather(capture_rng())} if self.group.distributed else {}),
            "identity": self.identity(),
            "deterministic": self.args.deterministic,
            "platform": self.platform,
        }

    def load_state_dict(self, state: dict[str, Any], source: Path) -> None:
        if state.get("identity") != self.identity():
            raise TrainError(f"checkpoint {source} was written for {state.get('identity')}, "
                             f"not {self.identity()}; use a fresh --checkpoint-dir")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.order.load_state_dict(state["data"])
        self.step = int(state["step"])
        if self.group.writer:  # one rank speaks for the world: the others resumed the same state
            self._say_why_not_bit_identical(state, source)
        self._restore_rng(state)  # last: building the model above drew from the generators

    def _say_why_not_bit_identical(self, state: dict[str, Any], source: Path) -> None:
        """A warning, and a `not_bit_identical` event the agent records for `status`, for each reason this
        resumed run cannot end bit-identical to an uninterrupted one."""
        for reason in reasons_not_bit_identical(state, self.args.deterministic, self.platform):
            say(f"warning: {source} was {reason}: from step {self.step} on the weights are not bit-identical to "
                "a run that was never interrupted (exact resume needs the same --deterministic, GPU model or CPU "
                "instruction set, torch, CUDA and cuDNN, precision and world size)")
            emit("not_bit_identical", step=self.step, reason=reason)

    def _restore_rng(self, state: dict[str, Any]) -> None:
        ranks = state.get("rng_ranks") or [state["rng"]]
        if len(ranks) == self.group.world:
            restore_rng(ranks[self.group.rank])
        else:  # another world size: a fresh stream per rank, the same whoever resumes at this step
            seed_everything(hash((self.args.seed, self.step, self.group.rank)) % 2**63)
