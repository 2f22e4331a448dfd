"""How the agent starts the training command: its argv (the built-in trainer, the user's own command,
or torchrun on several nodes) and the environment of the contract with it (CHECKPOINT_DIR, RESUME_FROM,
JOB_NAME, JOB_ATTEMPT and the world's size and address)."""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Callable
from pathlib import Path

from ..rounds import ROUND_FILE_ENV, ROUND_RESUME_ENV
from ..storage.layouts import Checkpoint
from .command import CommandProcess, LineSink, runtime_argv, with_auto_resume
from .config import AgentConfig
from .torchrun import torchrun_argv, worker_argv

SINGLE_NODE_ENV = {"NODE_RANK": "0", "NNODES": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def start_command(config: AgentConfig, resume_from: Checkpoint | None, *, attempt: int, round_file: Path,
                  local_addr: Callable[[], str], sink: LineSink, log: Callable[[str], None]) -> CommandProcess:
    builtin = config.command == "builtin"
    if config.distributed:
        worker = worker_argv(config, shlex.split(config.train_args))
        argv = torchrun_argv(config, local_addr(), worker)
        round_file.unlink(missing_ok=True)  # the launcher writes it again once a round forms
    elif builtin:
        argv = runtime_argv("train", *shlex.split(config.train_args))
    else:
        argv = ["/bin/bash", "-c", config.command]
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
        # Several nodes: torchrun gives each rank RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT.
        **({ROUND_FILE_ENV: str(round_file)} if config.distributed else SINGLE_NODE_ENV),
    }
    if config.distributed and not builtin:  # the built-in trainer agrees on a step by itself
        env[ROUND_RESUME_ENV] = "1"
    if not builtin:  # the built-in trainer resumes by itself
        env = with_auto_resume(env)
    log(f"starting {'the built-in trainer' if builtin else config.command!r}"
        f" (attempt {env['JOB_ATTEMPT']}, resume from {env['RESUME_FROM'] or 'scratch'})")
    return CommandProcess(argv, env, cwd=config.workdir, sink=sink).start()
