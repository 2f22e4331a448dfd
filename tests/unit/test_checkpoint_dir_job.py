"""run.checkpoint_dir and the console's CheckpointFolder: a script that already saves into its own folder
needs no change. The instances are told that folder, what a local run left in it never ships with the
code, and the console judges a typed folder by the job file's own rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stacks.job.checkpoint_dir_field import checkpoint_dir_problem
from tests.unit.stack_support import Synthesized, synth, user_data_text

JOB = """\
[run]
command = "{command}"
workdir = "code"
{extra}
[capacity]
instance_types = ["g5.xlarge"]
"""
FROM_THE_CONSOLE = "SPOT_CHECKPOINT_DIR=$(printf %s '<TOKEN>' | base64 -d)"


def job_with_code(root: Path, extra: str, command: str = "python train.py") -> Path:
    """A job shipping code/ where a local run of the script left code/outputs/checkpoint-500."""
    (root / "code/outputs/checkpoint-500").mkdir(parents=True)
    (root / "code/outputs/checkpoint-500/trainer_state.json").write_text('{"global_step": 500}')
    (root / "code/data/outputs").mkdir(parents=True)  # a folder of the same name deeper down is the user's data
    (root / "code/data/outputs/labels.txt").write_text("cat\n")
    (root / "code/train.py").write_text("print('training')\n")
    job = root / "mine.toml"
    job.write_text(JOB.format(command=command, extra=extra))
    return job


def shipped_files(outdir: Path) -> set[str]:
    (asset,) = [path for path in outdir.glob("asset.*") if path.is_dir()]  # the code (the runtime is a .whl)
    return {str(path.relative_to(asset)) for path in asset.rglob("*") if path.is_file()}


def folder_parameter(stack: Synthesized) -> dict:
    interface = stack.raw["Metadata"]["AWS::CloudFormation::Interface"]
    (what_to_run,) = [g for g in interface["ParameterGroups"] if g["Label"]["default"] == "What to run"]
    assert "CheckpointFolder" in what_to_run["Parameters"]
    assert interface["ParameterLabels"]["CheckpointFolder"] == {"default": "Checkpoint folder"}
    return stack.raw["Parameters"]["CheckpointFolder"]  # type: ignore[no-any-return]


def test_the_folder_reaches_the_instances_and_a_local_runs_checkpoints_stay_home(tmp_path: Path) -> None:
    stack = synth(str(job_with_code(tmp_path, 'checkpoint_dir = "outputs"')), tmp_path / "out")
    assert folder_parameter(stack)["Default"] == "outputs"
    assert FROM_THE_CONSOLE in user_data_text(stack)
    # A checkpoint-500 shipped in the code would be restored as the job's own and resumed from.
    assert shipped_files(tmp_path / "out") == {"train.py", "data/outputs/labels.txt"}


def test_without_it_the_console_offers_the_agents_own_folder_and_everything_ships(tmp_path: Path) -> None:
    stack = synth(str(job_with_code(tmp_path, "")), tmp_path / "out")
    assert folder_parameter(stack)["Default"] == ""  # user data then keeps /opt/spot-trainer/checkpoints
    assert "outputs/checkpoint-500/trainer_state.json" in shipped_files(tmp_path / "out")


def test_the_built_in_trainer_has_no_folder_to_choose(tmp_path: Path) -> None:
    builtin = job_with_code(tmp_path, 'train_args = "--model lm --synthetic --steps 10"', command="builtin")
    stack = synth(str(builtin), tmp_path / "out")
    assert "CheckpointFolder" not in stack.raw["Parameters"]
    assert "SPOT_CHECKPOINT_DIR" not in user_data_text(stack)


FOLDERS = ["", "outputs", "./outputs", "outputs/", "runs/exp-1", "a//b", ".hidden", ".", "./", "./.", "..", "../x",
           "a/../b", "x/..y", "/", "//", "/mnt", "/mnt/checkpoints", "/mnt/checkpoints/", "//mnt/ck", "/mnt/./x",
           "/mnt//x", "/home/ubuntu/out", "/etc/ckpt", "/etcetera/ckpt", "/var/tmp/x", "/opt/spot-trainer",
           "/opt/spot-trainer/work", "/opt/spot-trainer/work/outputs", "/opt/spot-trainer/checkpoints",
           "/opt/spot-trainer/checkpointsx", "/opt/spot-trainerx/a", "/mnt/..", "my outputs", "out;rm", "$(reboot)",
           "o" * 200, "o" * 201]


@pytest.fixture(scope="module")
def console_folder(synthesized: dict[str, Synthesized]) -> dict:
    """The CheckpointFolder parameter of the byo job (its own command)."""
    return synthesized["byo"].raw["Parameters"]["CheckpointFolder"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_console_takes_exactly_the_folders_the_job_file_takes(console_folder: dict, folder: str) -> None:
    in_the_job_file = not folder or checkpoint_dir_problem(folder) is None
    assert (re.fullmatch(console_folder["AllowedPattern"], folder) is not None) is in_the_job_file
    assert console_folder["ConstraintDescription"].startswith("empty, or a folder from the working directory")
