"""The Hugging Face callback under torchrun (two ranks on CPU, gloo, as two nodes would run them): a
stop signal to one rank stops the whole world at one step, saved once; ranks that resumed from
different checkpoints leave together, naming the step the next round must start from."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch

from tests.integration.agent_runner import REPO_ROOT

SCRIPT = REPO_ROOT / "jobs/hf/train.py"


def script_env(tmp_path: Path, steps: int, save_every: int) -> dict[str, str]:
    """The example script's knobs; `spot_trainer` is importable from this environment's install."""
    return {**os.environ, "HF_STEPS": str(steps), "HF_SAVE_STEPS": str(save_every), "OMP_NUM_THREADS": "1",
            "BASE": str(tmp_path), "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def world(tmp_path: Path, worker: str, env: dict[str, str]) -> list[subprocess.Popen[str]]:
    """Two torchrun "nodes" of one process each, as two instances run them, each rank running `worker`
    under bash (its pid in $BASE/pid-$RANK; not $$: torchrun reads arguments as string.Template macros);
    node N's output in $BASE/node-N.out and .err."""
    port = free_port()
    return [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node}", "--nproc-per-node=1",
         "--master-addr=127.0.0.1", f"--master-port={port}", "--max-restarts=0",
         "--no-python", "bash", "-c", f'echo $BASHPID > "$BASE/pid-$RANK"; {worker}'],
        env=env, cwd=tmp_path, stdout=(tmp_path / f"node-{node}.out").open("w"),
        stderr=(tmp_path / f"node-{node}.err").open("w"), text=True) for node in (0, 1)]


def output(tmp_path: Path) -> list[str]:
    return [line for node in (0, 1) for line in (tmp_path / f"node-{node}.out").read_text().splitlines()]


def errors(tmp_path: Path) -> str:
    return "".join((tmp_path / f"node-{node}.err").read_text()[-2000:] for node in (0, 1))


def stop_rank_one_after_step(tmp_path: Path, nodes: list[subprocess.Popen[str]], step: int) -> list[str]:
    """Send the agent's stop signal to rank 1 alone once the world has trained `step` steps; wait for both."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and all(node.poll() is None for node in nodes):
        if any(event.get("step", 0) >= step for event in events(output(tmp_path), "step")):
            os.kill(int((tmp_path / "pid-1").read_text()), signal.SIGTERM)  # the notice reaches one node
            break
        time.sleep(0.2)
    for node in nodes:
        node.wait(timeout=180)
    return output(tmp_path)


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
    nodes = world(tmp_path, f"exec {sys.executable} {SCRIPT}", env)
    lines = stop_rank_one_after_step(tmp_path, nodes, 20)
    text = "\n".join(lines) + errors(tmp_path)
    assert all(node.returncode != 0 for node in nodes), text
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
    nodes = world(tmp_path, f'CHECKPOINT_DIR="$BASE/$RANK" exec {sys.executable} {SCRIPT}', {**env, "HF_STEPS": "40"})
    for node in nodes:
        node.wait(timeout=240)
    lines = output(tmp_path)
    text = "\n".join(lines) + errors(tmp_path)
    assert all(node.returncode != 0 for node in nodes), text
    assert {event["rank"]: event["step"] for event in events(lines, "group_stop")} == {0: 20, 1: 20}, text
    lost = events(lines, "peer_lost")
    assert len(lost) == 2 and all("a new round starts from 20" in event["reason"] for event in lost)
    assert not events(lines, "step"), "no rank may train from a checkpoint the others did not load"


LIGHTNING = REPO_ROOT / "jobs/lightning/train.py"


def test_lightning_stops_every_rank_at_one_saved_step_when_one_rank_is_told(tmp_path: Path) -> None:
    """Lightning itself shares only rank 0's SIGTERM: the notice goes to rank 1 here."""
    env = {**os.environ, "PL_STEPS": "100000", "PL_SAVE_STEPS": "100000", "OMP_NUM_THREADS": "1",
           "BASE": str(tmp_path), "PYTHONUNBUFFERED": "1", "CHECKPOINT_DIR": str(tmp_path / "checkpoints")}
    nodes = world(tmp_path, f"exec {sys.executable} {LIGHTNING}", env)
    lines = stop_rank_one_after_step(tmp_path, nodes, 20)
    text = "\n".join(lines) + errors(tmp_path)
    assert all(node.returncode != 0 for node in nodes), text
    stops = {event["rank"]: event["step"] for event in events(lines, "group_stop")}
    assert set(stops) == {0, 1} and len(set(stops.values())) == 1, text
    (saved,) = events(lines, "emergency_checkpoint")
    step = saved["step"]
    # Named as ModelCheckpoint names its own; the epoch is the world's (each rank sees half the batches).
    (path,) = (tmp_path / "checkpoints").glob(f"epoch=*-step={step}.ckpt")
    assert step == stops[0] and torch.load(path, weights_only=False)["global_step"] == step, text
    assert "finished at global step" not in text
