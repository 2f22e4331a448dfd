"""run.checkpoint_dir: a script that already saves into its own folder needs no change. The instances are
told that folder, and what a local run left in it never ships with the code."""

from __future__ import annotations

from pathlib import Path

from tests.unit.stack_support import synth, user_data_text

JOB = """\
[run]
command = "python train.py"
workdir = "code"
{extra}
[capacity]
instance_types = ["g5.xlarge"]
"""


def job_with_code(root: Path, extra: str) -> Path:
    """A job shipping code/ where a local run of the script left code/outputs/checkpoint-500."""
    (root / "code/outputs/checkpoint-500").mkdir(parents=True)
    (root / "code/outputs/checkpoint-500/trainer_state.json").write_text('{"global_step": 500}')
    (root / "code/data/outputs").mkdir(parents=True)  # a folder of the same name deeper down is the user's data
    (root / "code/data/outputs/labels.txt").write_text("cat\n")
    (root / "code/train.py").write_text("print('training')\n")
    job = root / "mine.toml"
    job.write_text(JOB.format(extra=extra))
    return job


def shipped_files(outdir: Path) -> set[str]:
    (asset,) = outdir.glob("asset.*")
    return {str(path.relative_to(asset)) for path in asset.rglob("*") if path.is_file()}


def test_the_folder_reaches_the_instances_and_a_local_runs_checkpoints_stay_home(tmp_path: Path) -> None:
    job = job_with_code(tmp_path, 'checkpoint_dir = "outputs"')
    stack = synth(str(job), tmp_path / "out")
    assert "export SPOT_CHECKPOINT_DIR=outputs" in user_data_text(stack)
    # A checkpoint-500 shipped in the code would be restored as the job's own and resumed from.
    assert shipped_files(tmp_path / "out") == {"train.py", "data/outputs/labels.txt"}


def test_without_it_the_agent_keeps_its_own_folder_and_everything_ships(tmp_path: Path) -> None:
    job = job_with_code(tmp_path, "")
    stack = synth(str(job), tmp_path / "out")
    assert "SPOT_CHECKPOINT_DIR" not in user_data_text(stack)
    assert "outputs/checkpoint-500/trainer_state.json" in shipped_files(tmp_path / "out")
