"""How the agent starts the training command: the environment of the contract with it (CHECKPOINT_DIR,
RESUME_FROM, JOB_NAME, JOB_ATTEMPT) around what the node's mode launches: the built-in trainer or the
user's own command on one node (one_node/), torchrun on several (several_nodes/)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

from ...storage.saves.layouts import Checkpoint
from ..instance.config import AgentConfig
from ..program.command import CommandProcess, LineSink, with_auto_resume
from .mode import Launch


def start_command(config: AgentConfig, resume_from: Checkpoint | None, *, attempt: int, launch: Launch,
                  sink: LineSink, log: Callable[[str], None]) -> CommandProcess:
    builtin = config.program.builtin
    env = {
        # torchrun (the agent's own, or one the command starts, as `accelerate launch` does) forwards
        # the stop signal to its ranks but kills them 30 s later by default: a large emergency save
        # gets the whole grace period instead (torch >= 2.12 reads this; older versions keep 30 s)
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(math.ceil(config.grace_seconds)),
        **os.environ,
        **config.extra_env,
        "CHECKPOINT_DIR": str(Path(config.checkpoint_dir).resolve()),
        "RESUME_FROM": str(resume_from.path.resolve()) if resume_from else "",
        "JOB_NAME": config.job,
        "JOB_ATTEMPT": str(attempt),
        **launch.env,
    }
    if not builtin:  # the built-in trainer resumes by itself
        env = with_auto_resume(env)
    log(f"starting {'the built-in trainer' if builtin else config.command!r}"
        f" (attempt {env['JOB_ATTEMPT']}, resume from {env['RESUME_FROM'] or 'scratch'})")
    return CommandProcess(launch.argv, env, cwd=config.workdir, sink=sink).start()
