"""A job file's `run.workdir` that is not there: the one line names the absolute path it was looked for at
and the folders that are there, the closest first, so the fix is one edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.job.spec import JobSpecError
from stacks.job.workdir_field import check_workdir


def job_folder(tmp_path: Path, *folders: str) -> Path:
    for name in folders:
        (tmp_path / name).mkdir()
    job_file = tmp_path / "cnn.toml"
    job_file.write_text("")
    return job_file


def refusal(workdir: str, job_file: Path) -> str:
    with pytest.raises(JobSpecError) as caught:
        check_workdir(workdir, job_file)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_a_typo_names_the_path_looked_at_and_the_folder_meant(tmp_path: Path) -> None:
    job_file = job_folder(tmp_path, "cnn_src", "data", ".git", "__pycache__")
    assert refusal("cnn-src", job_file) == (
        f"run.workdir: 'cnn-src' is not a directory next to the job file: {tmp_path / 'cnn-src'} does not exist; "
        f"did you mean workdir = \"cnn_src\"? the folders in {tmp_path} are: cnn_src, data")


def test_a_file_of_that_name_is_said_to_be_a_file(tmp_path: Path) -> None:
    job_file = job_folder(tmp_path)
    (tmp_path / "train.py").write_text("")
    assert refusal("train.py", job_file) == (
        f"run.workdir: 'train.py' is not a directory next to the job file: {tmp_path / 'train.py'} is a file; "
        f"{tmp_path} holds no folder: put your code in one there and name it in workdir")


def test_a_relative_job_file_is_answered_with_the_absolute_path(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    job_folder(tmp_path, "src")
    monkeypatch.chdir(tmp_path)
    message = refusal("nested/src", Path("cnn.toml"))
    assert f"{tmp_path / 'nested' / 'src'} does not exist; nor is there a folder {tmp_path / 'nested'}" in message


def test_many_folders_are_counted_past_the_first_eight(tmp_path: Path) -> None:
    job_file = job_folder(tmp_path, *(f"f{i:02d}" for i in range(11)))
    assert refusal("code", job_file).endswith("f00, f01, f02, f03, f04, f05, f06, f07 and 3 more")


def test_a_folder_next_to_the_job_file_passes(tmp_path: Path) -> None:
    job_file = job_folder(tmp_path, "src")
    check_workdir("src", job_file)
    check_workdir("", job_file)  # none: the image's own folder
