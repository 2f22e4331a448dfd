"""`save_on_notice` in an Accelerate loop (a real Accelerator on the CPU, a real signal): it does nothing
until the agent's stop signal; then the step just finished is saved with Accelerate's own
`save_state` and the process ends with 128 + the signal, without saving again a step the loop has
just saved itself."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState

from spot_trainer.integrations.accelerate import NoticeSaver


@pytest.fixture
def accelerator() -> Iterator[Accelerator]:
    previous = signal.getsignal(signal.SIGTERM)
    try:
        accelerator = Accelerator(cpu=True)
        model = torch.nn.Linear(4, 1)
        accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
        yield accelerator
    finally:
        signal.signal(signal.SIGTERM, previous)
        AcceleratorState._reset_state(True)


def test_nothing_is_saved_until_the_stop_signal_then_the_step_is_saved_and_the_process_ends(
    accelerator: Accelerator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_on_notice = NoticeSaver()
    save_on_notice(accelerator, tmp_path / "checkpoint-1", 1)
    assert not (tmp_path / "checkpoint-1").exists()

    os.kill(os.getpid(), signal.SIGTERM)  # the agent's stop signal, handled from the first call on
    with pytest.raises(SystemExit) as ended:
        save_on_notice(accelerator, tmp_path / "checkpoint-2", 2)
    assert ended.value.code == 128 + signal.SIGTERM
    assert {"model.safetensors", "optimizer.bin", "random_states_0.pkl"} <= {
        path.name for path in (tmp_path / "checkpoint-2").iterdir()}
    assert '{"event": "emergency_checkpoint", "step": 2, "signal": "SIGTERM"}' in capsys.readouterr().out


def test_a_step_the_loop_has_just_saved_is_not_saved_again(accelerator: Accelerator, tmp_path: Path) -> None:
    save_on_notice = NoticeSaver()
    save_on_notice(accelerator, tmp_path / "checkpoint-1", 1)
    accelerator.save_state(str(tmp_path / "checkpoint-2"))  # the loop's own save at this step
    written = {path.name: path.stat().st_mtime_ns for path in (tmp_path / "checkpoint-2").iterdir()}

    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(SystemExit):
        save_on_notice(accelerator, tmp_path / "checkpoint-2", 2)
    # The agent may be uploading those files: rewriting them could tear its copy.
    assert {path.name: path.stat().st_mtime_ns for path in (tmp_path / "checkpoint-2").iterdir()} == written
