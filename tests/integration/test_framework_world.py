"""The Hugging Face callback under torchrun (two ranks on CPU, gloo, as two nodes would run them): a
stop signal to one rank stops the whole world at one step, saved once; ranks that resumed from
different checkpoints leave together, naming the step the next round must start from."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.agent_runner import REPO_ROOT

SCRIPT = REPO_ROOT / "jobs/hf/train.py"


def script_env(tmp_path: Path, steps: int, save_every: int) -> dict[str, str]:
    """The example script's knobs; `spot_trainer` is importable from this environment's install."""
    return {**os.environ, "HF_STEPS": str(steps), "HF_SAVE_STEPS": str(save_every), "OMP_NUM_THREADS": "1",
            "BASE": str(tmp_path), "PYTHONUNBUFFERED": "1"}


def world(tmp_path: Path, worker: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """torchrun with two ranks, each running `worker` under bash (its pid in $BASE/pid-$LOCAL_RANK; not
    $$: torchrun reads its arguments as string.Template macros)."""
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--max-restarts=0",
         "--no-python", "bash", "-c", f'echo $BASHPID > "$BASE/pid-$LOCAL_RANK"; {worker}'],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=(tmp_path / "stderr.log").open("w"), text=True)


def events(lines: list[str], kind: str) -> list[dict]:
    found = []
    for line in lines:
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == kind:
                found.append(event)
    return found


def test_a_stop_signal_to_one_rank_stops_the_world_at_one_saved_step(tmp_path: Path) -> None:
    env = {**script_env(tmp_path, steps=100_000, save_every=100_000), "CHECKPOINT_DIR": str(tmp_path / "checkpoints")}
    process = world(tmp_path, f"exec {sys.executable} {SCRIPT}", env)
    lines: list[str] = []
    assert process.stdout is not None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if any(event.get("step", 0) >= 20 for event in events(lines[-1:], "step")):
            os.kill(int((tmp_path / "pid-1").read_text()), signal.SIGTERM)  # the notice reaches one node
            break
    remaining, _ = process.communicate(timeout=180)
    lines += remaining.splitlines()
    text = "\n".join(lines) + (tmp_path / "stderr.log").read_text()[-3000:]
    assert process.returncode != 0, text
    stops = {event["rank"]: event["step"] for event in events(lines, "group_stop")}
    assert set(stops) == {0, 1} and len(set(stops.values())) == 1, text  # both ranks stopped at one step
    (saved,) = events(lines, "emergency_checkpoint")  # written once, by rank 0
    step = saved["step"]
    assert step == stops[0] and step >= 20
    state = json.loads((tmp_path / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json").read_text())
    assert state["global_step"] == step
    assert "finished at global step" not in text, "a stopped rank must not run the script's code after train()"


def test_ranks_resumed_from_different_checkpoints_leave_together_for_the_newest(tmp_path: Path) -> None:
    env = script_env(tmp_path, steps=20, save_every=10)
    first = subprocess.run([sys.executable, str(SCRIPT)], env={**env, "CHECKPOINT_DIR": str(tmp_path / "0")},
                           cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert first.returncode == 0, first.stdout + first.stderr
    shutil.copytree(tmp_path / "0", tmp_path / "1")
    shutil.rmtree(tmp_path / "1" / "checkpoint-20")  # this node's disk holds only the older save
    process = world(tmp_path, f'CHECKPOINT_DIR="$BASE/$LOCAL_RANK" exec {sys.executable} {SCRIPT}',
                    {**env, "HF_STEPS": "40"})
    output, _ = process.communicate(timeout=240)
    lines = output.splitlines()
    output += (tmp_path / "stderr.log").read_text()[-3000:]
    assert process.returncode != 0, output
    assert {event["rank"]: event["step"] for event in events(lines, "group_stop")} == {0: 20, 1: 20}, output
    lost = events(lines, "peer_lost")
    assert len(lost) == 2 and all("a new round starts from 20" in event["reason"] for event in lost)
    assert not events(lines, "step"), "no rank may train from a checkpoint the others did not load"
