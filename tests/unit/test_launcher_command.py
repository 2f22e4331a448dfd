"""A command that starts its own torchrun or `accelerate launch` under `distributed = true` is refused in one
line that says why; the same command on one node, and a plain script under distributed, are accepted."""

from __future__ import annotations

import tomllib

import pytest

from stacks.job.launcher_command import own_launcher
from stacks.job.spec import JOBS_DIR, JobSpecError
from stacks.job_file import parse_job

DDP = tomllib.loads((JOBS_DIR / "ddp.toml").read_text())


def ddp_with(command: str) -> dict[str, object]:
    return {**DDP, "run": {**DDP["run"], "command": command}}


@pytest.mark.parametrize(("command", "launcher"), [
    ("torchrun --nproc-per-node 4 train.py", "torchrun"),
    ("NCCL_DEBUG=INFO torchrun train.py", "torchrun"),
    ("cd src && python -m torch.distributed.run train.py", "python -m torch.distributed.run"),
    ("accelerate launch --multi_gpu train.py", "accelerate launch"),
    ("/opt/pytorch/bin/torchrun train.py", "torchrun"),
    ("exec deepspeed train.py", "deepspeed"),
])
def test_own_launchers_are_found(command: str, launcher: str) -> None:
    assert own_launcher(command) == launcher


@pytest.mark.parametrize("command", ["python train.py", "python torchrun_notes.py", "echo torchrun"])
def test_plain_commands_start_no_launcher(command: str) -> None:
    assert own_launcher(command) == ""


def test_a_launcher_under_distributed_is_refused_with_the_reason() -> None:
    with pytest.raises(JobSpecError) as caught:
        parse_job(ddp_with("torchrun --nproc-per-node 8 train.py"), JOBS_DIR / "ddp.toml")
    assert str(caught.value).endswith(
        "run.command: starts its own torchrun: with capacity.distributed = true the agent already runs the command "
        'under its torchrun, once per GPU; give the script itself, e.g. "python train.py"')


def test_a_launcher_on_one_node_and_a_script_under_distributed_are_accepted() -> None:
    capacity = {key: value for key, value in DDP["capacity"].items() if key not in ("min_nodes", "placement")}
    single = {**ddp_with("accelerate launch train.py"), "capacity": {**capacity, "distributed": False}}
    assert parse_job(single, JOBS_DIR / "ddp.toml").run.command == "accelerate launch train.py"
    assert parse_job(ddp_with("python train.py"), JOBS_DIR / "ddp.toml").capacity.distributed
