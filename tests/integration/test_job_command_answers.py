"""Bad input and bad state of the job commands, swept against the local cloud (moto): each is one line on
stderr that names what is wrong and the fix, the exit status is not 0, and nothing is written outside the
folder a download was given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stacks.job.spec import JobSpecError
from stacks.job_file import load_job
from tests.conftest import REPO_ROOT
from tests.integration.test_job_commands import Job, deployed, job, one_line, run, user_env

__all__ = ["deployed", "job", "user_env"]  # the deployed job's fixtures, shared with the commands' own tests

HOSTILE = ["final/../escaped.txt", "final/../../../../tmp/escaped.txt", "final//etc/escaped.txt",
           "final/./dot.txt", "final/a//b.txt"]


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_hostile_keys_under_final_are_named_as_keys_and_nothing_is_written(
        job: Job, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s3 = job.client("s3")
    s3.put_object(Bucket=job.bucket, Key=f"{job.name}/final/model.bin", Body=b"weights")
    s3.put_object(Bucket=job.bucket, Key=f"{job.name}/final/sub/", Body=b"")  # a console folder marker: kept out
    for key in HOSTILE:
        s3.put_object(Bucket=job.bucket, Key=f"{job.name}/{key}", Body=b"not for you")
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket=job.bucket, Prefix=f"{job.name}/final/")["Contents"]}
    hostile = sorted(f"{job.name}/{key}" for key in HOSTILE)
    assert listed == {*hostile, f"{job.name}/final/model.bin", f"{job.name}/final/sub/"}  # kept as named
    inside = tmp_path / "work"
    inside.mkdir()
    result = run(capsys, "outputs", "--job", job.name, "--to", str(inside / "out"))
    line = one_line(result)
    assert result.returncode == 1 and "manifest" not in line, line
    assert line.startswith(f"spot-trainer outputs: s3://{job.bucket}/{job.name}/final/ holds {len(hostile)} key(s) "
                           "that cannot be a file inside a folder (a `..`, `.` or empty part, or a leading `/`): ")
    assert repr(hostile[0]) in line and "rename or delete them in the bucket" in line, line
    assert files_under(tmp_path) == ["work"]  # neither the folder nor anything beside or above it


def test_a_reader_that_goes_away_ends_the_command_quietly(job: Job) -> None:
    """`spot-trainer status --job x | head -1`, with the reader gone before the first line is written."""
    process = subprocess.Popen([sys.executable, "-m", "spot_trainer", "status", "--job", job.name], env=job.env,
                               cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 141 and err == b"", err.decode()


def test_an_unknown_job_close_to_a_deployed_one_is_asked_about(job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    typo = job.name + "x"
    for command in ("status", "logs", "pause", "resume", "outputs"):
        result = run(capsys, command, "--job", typo)
        assert result.returncode == 2 and one_line(result) == (
            f"spot-trainer {command}: no stack SpotTrainer-{typo} in us-east-1: did you mean --job {job.name}? "
            f"Else deploy it with `npx cdk deploy -c job={typo}`, or give --bucket for a job whose stack is gone")


@pytest.mark.parametrize("given", [True, False], ids=["--to", "the default folder"])
def test_a_download_folder_that_is_not_empty_names_to(job: Job, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch, given: bool) -> None:
    job.client("s3").put_object(Bucket=job.bucket, Key=f"{job.name}/final/model.bin", Body=b"weights")
    monkeypatch.chdir(tmp_path)
    folder = Path("mine") if given else Path(f"{job.name}-outputs")
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    result = run(capsys, "outputs", "--job", job.name, *(("--to", str(folder)) if given else ()))
    assert result.returncode == 2 and one_line(result) == (
        f"spot-trainer outputs: {folder} is not empty: name an empty or new folder to download into with --to FOLDER")
    assert files_under(tmp_path) == [str(folder), str(folder / "notes.txt")]
    assert (folder / "notes.txt").read_text() == "keep me"


def test_a_job_file_whose_workdir_is_not_there_names_the_folders_that_are(tmp_path: Path) -> None:
    (tmp_path / "cnn_src").mkdir()
    job_file = tmp_path / "cnn.toml"
    job_file.write_text('[run]\ncommand = "python train.py"\nworkdir = "cnn-src"\n')
    with pytest.raises(JobSpecError) as caught:
        load_job(str(job_file))
    assert str(caught.value) == (
        f"{job_file}: run.workdir: 'cnn-src' is not a directory next to the job file: {tmp_path / 'cnn-src'} does "
        f"not exist; did you mean workdir = \"cnn_src\"? the folders in {tmp_path} are: cnn_src")
    assert files_under(tmp_path) == ["cnn.toml", "cnn_src"]
