"""The trainer's command line and failure paths: one clear line, no traceback, nothing written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from spot_trainer.builtin.loop import main, parse_args
from spot_trainer.builtin_arguments import ArgumentsError, check_arguments
from spot_trainer.storage.files.local import list_checkpoints

ROOT = Path(__file__).resolve().parents[2]


def parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


BASE = ["--model", "lm", "--steps", "10", "--synthetic", "--checkpoint-dir", "ck"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "cnn", "--steps", "1", "--synthetic", "--checkpoint-dir", "x"], "invalid choice: 'cnn'"),
        (BASE[:3] + ["0"] + BASE[4:], "expected a positive integer, got 0"),
        (BASE + ["--data", "d"], "not allowed with argument --synthetic"),
        (BASE + ["--checkpoint-every-steps", "5", "--checkpoint-every-seconds", "9"], "not allowed with"),
        (BASE + ["--checkpoint-every-seconds", "nan"], "expected a positive number, got nan"),
        (BASE + ["--width", "30"], "--width 30 must be a multiple of 4"),
        (BASE + ["--warmup-steps", "11"], "--warmup-steps 11 must be between 0 and --steps 10"),
        (BASE + ["--min-step-seconds", "inf"], "expected a finite number of 0 or more, got inf"),
        (BASE + ["--min-step-seconds", "-1"], "expected a finite number of 0 or more, got -1"),
        (BASE[:-1] + [""], "--checkpoint-dir must not be empty"),
        (BASE + ["--hold-at-step", "5"], "--hold-at-step and --hold-while go together"),
    ],
)
def test_bad_flags_are_named_in_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert message in parse_error(argv, capsys)


def test_checkpoint_dir_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("CHECKPOINT_DIR", "/restored/here")
    assert parse_args(BASE[:5]).checkpoint_dir == "/restored/here"
    monkeypatch.delenv("CHECKPOINT_DIR")
    assert "--checkpoint-dir is required" in parse_error(BASE[:5], capsys)


@pytest.fixture
def keep_signal_handlers() -> Iterator[None]:
    """main() installs SIGTERM/SIGINT handlers; give pytest its own back afterwards."""
    saved = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


def run_trainer(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.usefixtures("keep_signal_handlers")
def test_unreadable_data_fails_with_one_line_and_writes_nothing(tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "images.npy", np.zeros((4, 28, 28), dtype=np.uint8))
    np.save(data / "labels.npy", np.zeros(4, dtype=np.int64))
    checkpoints = tmp_path / "ck"

    code, errors = run_trainer(
        ["--model", "resnet", "--steps", "2", "--data", str(data), "--checkpoint-dir", str(checkpoints)], capsys
    )

    assert code == 1 and len(errors) == 1
    assert errors[0].startswith("error: ") and "images.npy: shape (4, 28, 28), expected (N, 32, 32, 3)" in errors[0]
    assert list_checkpoints(checkpoints) == []


@pytest.mark.usefixtures("keep_signal_handlers")
def test_checkpoint_of_another_model_is_refused_with_one_line(tmp_path: Path, capsys) -> None:
    checkpoints = str(tmp_path / "ck")
    small = ["--steps", "2", "--batch-size", "4", "--synthetic", "--checkpoint-dir", checkpoints, "--width", "8"]
    assert run_trainer(["--model", "lm", *small], capsys)[0] == 0
    before = list_checkpoints(checkpoints)

    code, errors = run_trainer(["--model", "lm", *small[:-1], "12"], capsys)

    assert code == 1 and len(errors) == 1
    assert "was written for {'model': 'lm', 'width': 8" in errors[0] and "use a fresh --checkpoint-dir" in errors[0]
    assert list_checkpoints(checkpoints) == before  # the old checkpoints are untouched


@pytest.mark.usefixtures("keep_signal_handlers")
def test_time_based_checkpoints_and_the_final_one_are_committed(tmp_path: Path, capsys) -> None:
    checkpoints = tmp_path / "ck"
    argv = ["--model", "lm", "--steps", "3", "--batch-size", "2", "--synthetic", "--width", "8",
            "--checkpoint-dir", str(checkpoints), "--checkpoint-every-seconds", "1e-6", "--keep", "5"]

    code = main(argv)

    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [e["step"] for e in events if e["event"] == "checkpoint"] == [1, 2, 3]
    assert events[-1] == {"event": "done", "step": 3}
    assert [step for step, _ in list_checkpoints(checkpoints)] == [1, 2, 3]


@pytest.mark.usefixtures("keep_signal_handlers")
def test_unwritable_checkpoint_dir_fails_before_training(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")

    code, errors = run_trainer(BASE[:6] + [str(blocker / "ck")], capsys)

    assert code == 1 and len(errors) == 1 and errors[0].startswith("error: ") and "file/ck" in errors[0]


@pytest.mark.usefixtures("keep_signal_handlers")
def test_a_checkpoint_dir_that_is_a_file_is_one_line_naming_the_flag(tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("not a directory")
    for place in (tmp_path / "file", tmp_path / "file" / "ck"):
        code, errors = run_trainer(["--model", "lm", "--steps", "2", "--synthetic", "--width", "8",
                                    "--checkpoint-dir", str(place)], capsys)
        assert code == 1 and errors == [f"error: --checkpoint-dir {place} is not a usable directory "
                                        f"({'File exists' if place.name == 'file' else 'Not a directory'})"]


@pytest.mark.usefixtures("keep_signal_handlers")
def test_an_unloadable_resume_point_is_never_replaced_by_step_0(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoints = tmp_path / "ck"
    damaged = checkpoints / "step-00000099"
    damaged.parent.mkdir()
    damaged.write_text("not a checkpoint")  # what S3 held as the newest step, restored by the agent
    monkeypatch.setenv("RESUME_FROM", str(damaged))
    code, errors = run_trainer(["--model", "lm", "--steps", "2", "--synthetic", "--width", "8",
                                "--checkpoint-dir", str(checkpoints)], capsys)
    assert code == 1
    assert errors[-1] == (f"error: RESUME_FROM {damaged} cannot be loaded and no older checkpoint is here: "
                          "refusing to start over from step 0")
    assert [p.name for p in checkpoints.iterdir()] == ["step-00000099"], "nothing was trained over it"


def test_the_parser_imports_no_torch_so_the_stack_can_check_a_job_with_it() -> None:
    # The stack runs the trainer's own parser at synth; the CDK app must never load torch.
    code = ("import sys; import stacks.job.fields, spot_trainer.builtin_arguments; "
            "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                            env={**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "resnet", "--steps", "10"], "one of the arguments --data --synthetic is required"),
    (["--model", "lm", "--steps", "9", "--synthetic", "--steps", "90"], "--steps is given more than once"),
    (["--model", "lm", "--ste", "9", "--synthetic"], "--ste: spell the flag in full (--steps)"),
    (["--model", "lm", "--steps", "9", "--synthetic", "-h"],
     "--help only prints the help: the job would end after no steps"),
])
def test_checking_arguments_raises_one_line_instead_of_exiting(argv: list[str], message: str) -> None:
    with pytest.raises(ArgumentsError) as caught:
        check_arguments(argv)
    assert str(caught.value) == message


def test_checked_arguments_are_the_ones_the_trainer_reads() -> None:
    argv = ["--model", "lm", "--steps", "9", "--data=s3://sets/x"]
    checked = check_arguments(argv)
    assert (checked.model, checked.steps, checked.data, checked.width) == ("lm", 9, "s3://sets/x", 64)
    assert vars(checked) == vars(parse_args([*argv, "--checkpoint-dir", str(checked.checkpoint_dir or "ck")])) | {
        "checkpoint_dir": checked.checkpoint_dir}
