"""A command given a checkpoint that trains from step 0 again is named at its first save below it,
with what loads the checkpoint in the words of the layout it saves in; a command that resumes, and
checkpoints older than the run (a framework's rotation keeps a few), are not."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from spot_trainer.agent.watches.save_watch import SaveWatch


def hf_save(directory: Path, step: int) -> Path:
    path = directory / f"checkpoint-{step}"
    path.mkdir()
    (path / "model.safetensors").write_bytes(b"w")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))  # written last: complete
    return path


def lightning_save(directory: Path, step: int) -> Path:
    path = directory / f"epoch=0-step={step}.ckpt"
    torch.save({"epoch": 0, "global_step": step, "state_dict": {}}, path)  # Lightning's dict, its first keys
    return path


def accelerate_save(directory: Path, step: int) -> Path:
    path = directory / f"checkpoint-{step}"  # as the diffusers training scripts name Accelerate's save_state
    path.mkdir()
    save_file({"w": torch.zeros(4)}, path / "model.safetensors")
    torch.save({"random_state": [1, 2, 3]}, path / "random_states_0.pkl")  # written last
    return path


def generic_save(directory: Path, step: int) -> Path:
    path = directory / f"model_step{step}.pt"
    path.write_bytes(b"w")
    return path


Save = Callable[[Path, int], Path]
LAYOUTS = {
    "hf": (hf_save, "pass resume_from_checkpoint=get_last_checkpoint(output_dir) to trainer.train()"),
    "lightning": (lightning_save, 'pass ckpt_path="last" to trainer.fit()'),
    "accelerate": (accelerate_save, 'call accelerator.load_state(os.environ["RESUME_FROM"]) after '
                                    "accelerator.prepare() (the diffusers training scripts: --resume_from_checkpoint "
                                    "latest)"),
    "generic": (generic_save, "load $RESUME_FROM (the newest checkpoint in CHECKPOINT_DIR) before the first step"),
}


def restored_before_the_run(save: Save, directory: Path, step: int) -> Path:
    path = save(directory, step)
    then = time.time() - 60
    os.utime(path, (then, then))
    return path


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_first_save_below_the_restored_step_is_named_once_with_how_to_resume(tmp_path: Path, layout: str) -> None:
    save, hint = LAYOUTS[layout]
    older = restored_before_the_run(save, tmp_path, 400)  # kept by the framework's rotation
    restored = restored_before_the_run(save, tmp_path, 500)
    warnings: list[str] = []
    watch = SaveWatch(tmp_path, 3600, warnings.append).start(resumed=True, restored=restored)
    watch.check((500, restored))
    assert warnings == [], f"{older.name}, older than the run, is no fresh start"
    fresh = save(tmp_path, 100)
    save(tmp_path, 200)
    watch.check((500, restored))
    watch.check((500, restored))
    assert warnings == [
        f"the command started over: it saved {fresh.name} (step 100) after {restored.name} (step 500) was restored "
        "for it, so every interruption costs the whole run and nothing it saves below step 500 is uploaded. "
        f"To resume, {hint}"
    ]


def test_a_command_that_resumes_is_not_named(tmp_path: Path) -> None:
    restored = restored_before_the_run(hf_save, tmp_path, 500)
    warnings: list[str] = []
    watch = SaveWatch(tmp_path, 3600, warnings.append).start(resumed=True, restored=restored)
    newer = hf_save(tmp_path, 550)
    watch.check((550, newer), exited=True)
    assert warnings == []


def test_a_half_written_save_below_is_not_yet_a_fresh_start(tmp_path: Path) -> None:
    restored = restored_before_the_run(hf_save, tmp_path, 500)
    (tmp_path / "checkpoint-100").mkdir()  # trainer_state.json not written yet
    warnings: list[str] = []
    SaveWatch(tmp_path, 3600, warnings.append).start(resumed=True, restored=restored).check((500, restored))
    assert warnings == []


def test_a_restored_file_written_again_at_a_later_step_is_no_fresh_start(tmp_path: Path) -> None:
    # Restored as last.ckpt (the only copy of its step); the resumed run saves 150, then last.ckpt at 200.
    restored = restored_before_the_run(lightning_save, tmp_path, 100)
    restored = restored.rename(tmp_path / "last.ckpt")
    warnings: list[str] = []
    watch = SaveWatch(tmp_path, 3600, warnings.append).start(resumed=True, restored=restored)
    lightning_save(tmp_path, 150)
    lightning_save(tmp_path, 200).replace(restored)
    watch.check((200, restored))
    assert warnings == []
