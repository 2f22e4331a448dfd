"""A notice costs no completed step, with no line of code: an HF Trainer or a Lightning Trainer built
without our callback gets it.

Without it, HF dies on SIGTERM and Lightning ends `fit` saving nothing: the replacement redoes the
steps since the script's last save (up to one save interval). With it (hf.py, lightning.py), the step
in flight finishes and is saved where the framework saves its own. A Trainer that already has the
callback (the script added it) is left as it is: never twice. Accelerate loops have no hook point
and keep their one explicit line. Installed, like the resume, by auto_resume.hooks; SPOT_AUTO_RESUME=off
leaves it out.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .init_arguments import before_init

if TYPE_CHECKING:
    from inspect import BoundArguments

HF_MODULE = "transformers.trainer"
LIGHTNING_MODULES = ("lightning.pytorch.trainer.trainer",)  # our callback is written for `lightning` 2.x


def add_to_hf(module: ModuleType) -> None:
    from .hf import SpotTrainerCallback

    trainer = module.Trainer
    initialise = trainer.__init__

    @functools.wraps(initialise)
    def with_our_callback(self: Any, *args: Any, **kwargs: Any) -> None:
        initialise(self, *args, **kwargs)
        if not any(isinstance(callback, SpotTrainerCallback) for callback in self.callback_handler.callbacks):
            self.add_callback(SpotTrainerCallback())
            _say("SpotTrainerCallback")

    trainer.__init__ = with_our_callback


def add_to_lightning(module: ModuleType) -> None:
    before_init(module.Trainer, with_spot_checkpoint)


def with_spot_checkpoint(bound: BoundArguments) -> None:
    from .lightning import SpotCheckpoint

    given = bound.arguments.get("callbacks")
    callbacks = [given] if given is not None and not isinstance(given, Iterable) else list(given or [])
    if not any(isinstance(callback, SpotCheckpoint) for callback in callbacks):
        bound.arguments["callbacks"] = [*callbacks, SpotCheckpoint()]
        _say("SpotCheckpoint")


def _say(callback: str) -> None:
    if os.environ.get("RANK", "0") == "0":
        print(f"spot-trainer: added {callback} to the Trainer: a notice saves the step in flight "
              "(SPOT_AUTO_RESUME=off leaves it out)", file=sys.stderr, flush=True)
