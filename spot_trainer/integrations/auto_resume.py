"""A script that never asks to resume still resumes: HF's `trainer.train()`, Lightning's `trainer.fit(model)`.

A run the agent gave a checkpoint to (RESUME_FROM is set) must not start over at step 0: every
interruption would cost the whole run, and a long job would never finish. So the first `train()` or
`fit()` of a process that names no checkpoint is given the newest one in CHECKPOINT_DIR, found the
framework's own way: HF's `get_last_checkpoint`, Lightning's `last.ckpt` (the agent links one to the
step it restores; `save_last=True` keeps it current). Lightning does the same by itself under SLURM
(`ckpt_path="hpc"`). A value the script passes (a path, `resume_from_checkpoint=False`,
`ckpt_path="best"`) is its own choice and is kept, and so is every later call (a second phase of
training is not a restart) and a trainer that saves anywhere but CHECKPOINT_DIR. A Lightning
ModelCheckpoint without a dirpath saves where the agent looks (lightning_dirpath.py), and a Trainer
built without our callback gets it (auto_callback.py).
`SPOT_AUTO_RESUME=off` in the command's environment turns all this off; a Lightning Trainer under
torchrun still trains on this round's nodes (lightning_nodes.py).
`python-startup/sitecustomize.py` installs it in every Python process of a command of the user's own.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from . import auto_callback, missing_reads
from .auto_callback import HF_MODULE
from .checkpoint_names import LIGHTNING_LAST
from .lightning_dirpath import MODULES as LIGHTNING_CHECKPOINT_MODULES
from .lightning_dirpath import save_into_checkpoint_dir
from .lightning_nodes import MODULES as LIGHTNING_TRAINER_MODULES
from .lightning_nodes import follow_the_round
from .post_import import Hook, when_imported

SWITCH = "SPOT_AUTO_RESUME"

Method = Callable[..., Any]


def install() -> None:
    """Patch the frameworks when (and if) the script imports them; nothing is imported here."""
    when_imported(hooks(os.environ))


def hooks(env: Mapping[str, str]) -> dict[str, Hook]:
    """Module → patch, for a command the agent runs with this environment."""
    if not env.get("CHECKPOINT_DIR"):
        return {}
    # Not a matter of resuming: without it Lightning does not start on a round of several nodes, and without
    # the other a rank would load zeros from a step its node restored in part.
    patches: dict[str, list[Hook]] = {name: [follow_the_round] for name in LIGHTNING_TRAINER_MODULES}
    patches[missing_reads.MODULE] = [missing_reads.fetch_before_reading]
    if env.get(SWITCH, "").strip().lower() in ("off", "0", "false", "no"):
        return _chained(patches)
    for name in LIGHTNING_CHECKPOINT_MODULES:
        patches.setdefault(name, []).append(save_into_checkpoint_dir)
    patches.setdefault(HF_MODULE, []).append(auto_callback.add_to_hf)
    for name in auto_callback.LIGHTNING_MODULES:
        patches.setdefault(name, []).append(auto_callback.add_to_lightning)
    if env.get("RESUME_FROM"):  # not on the first run of the job: nothing to resume from
        patches.setdefault(HF_MODULE, []).append(_patch_hf)
        for name in LIGHTNING_TRAINER_MODULES:
            patches.setdefault(name, []).append(_patch_lightning)
    return _chained(patches)


def _chained(patches: dict[str, list[Hook]]) -> dict[str, Hook]:
    def chain(hooks: list[Hook]) -> Hook:
        def hook(module: ModuleType) -> None:
            for each in hooks:
                each(module)
        return hook
    return {name: hooks[0] if len(hooks) == 1 else chain(hooks) for name, hooks in patches.items()}


def newest_hf_checkpoint() -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    directory = os.environ["CHECKPOINT_DIR"]
    return get_last_checkpoint(directory) if os.path.isdir(directory) else None


def newest_lightning_checkpoint() -> str | None:
    last = os.path.join(os.environ["CHECKPOINT_DIR"], LIGHTNING_LAST)
    return last if os.path.isfile(last) else None


def saves_into_checkpoint_dir(folder: str | None) -> bool:
    """A trainer that saves elsewhere (a k-fold loop's fold3/, a second phase's own folder) is another
    training than the one the agent restored: it is not resumed from CHECKPOINT_DIR."""
    return folder is not None and os.path.realpath(folder) == os.path.realpath(os.environ["CHECKPOINT_DIR"])


def _patch_hf(module: ModuleType) -> None:
    trainer = module.Trainer
    trainer.train = resume_by_default(
        trainer.train, "resume_from_checkpoint", newest_hf_checkpoint, "Trainer.train()",
        saves_here=lambda self: saves_into_checkpoint_dir(self.args.output_dir))


def _patch_lightning(module: ModuleType) -> None:
    trainer = module.Trainer
    trainer.fit = resume_by_default(
        trainer.fit, "ckpt_path", newest_lightning_checkpoint, "Trainer.fit()",
        saves_here=lambda self: any(saves_into_checkpoint_dir(getattr(callback, "dirpath", None))
                                    for callback in self.checkpoint_callbacks),
        # The job's own checkpoint: torch's weights_only default would refuse the hyperparameters a script
        # saves with it (an argparse.Namespace, a dataclass) and fail every resume of a script that ran.
        trusted="weights_only")


def resume_by_default(method: Method, argument: str, newest: Callable[[], str | None], call: str, *,
                      saves_here: Callable[[Any], bool], trusted: str = "") -> Method:
    """`method` whose first call gets `argument=newest()` when the caller left it None and the trainer it
    is called on (`self`) saves where the agent restored; `trusted`, when left None too, becomes False."""
    import inspect  # here, not at start-up: only a process that imports a framework pays for it

    signature = inspect.signature(method)
    called = False

    @functools.wraps(method)
    def resuming(*args: Any, **kwargs: Any) -> Any:
        nonlocal called
        bound = signature.bind(*args, **kwargs)
        if (not called and bound.arguments.get(argument) is None and saves_here(bound.args[0])
                and (checkpoint := newest())):
            bound.arguments[argument] = checkpoint
            if trusted in signature.parameters and bound.arguments.get(trusted) is None:
                bound.arguments[trusted] = False
            _say(f"{call} named no checkpoint: resuming from {checkpoint}, the newest in CHECKPOINT_DIR "
                 f"({SWITCH}=off starts over instead)")
        called = True
        return method(*bound.args, **bound.kwargs)

    return resuming


def _say(line: str) -> None:
    if os.environ.get("RANK", "0") == "0":  # under torchrun every rank resumes; one says so
        print(f"spot-trainer: {line}", file=sys.stderr, flush=True)
