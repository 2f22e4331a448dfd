"""HF Trainer and Lightning write their checkpoints in place. A script SIGKILLed at random moments
around its saves (as a power-off would) must never leave the next start something it cannot load:
the agent uploads only entries its layouts call complete, and before each start it moves aside what
a dead writer left half-written, so get_last_checkpoint and ckpt_path="last" find a whole one.

Each round restarts the script on the same disk, as the agent does after a crash; the round after
a kill proves the load by saving a newer step. SPOT_KILL_SEED replays a failing run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spot_trainer.storage.saves import layouts
from tests.integration.agent_runner import REPO_ROOT

STEPS, SAVE_EVERY, KILLS = 150, 5, 3
SCRIPTS = {"hf": ("jobs/hf/train.py", "HF"), "lightning": ("jobs/lightning/train.py", "PL")}


def start_script(framework: str, directory: Path, log: Path) -> subprocess.Popen[bytes]:
    script, prefix = SCRIPTS[framework]
    env = {**os.environ, "CHECKPOINT_DIR": str(directory), "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1",
           f"{prefix}_STEPS": str(STEPS), f"{prefix}_SAVE_STEPS": str(SAVE_EVERY), f"{prefix}_CALLBACK": "off"}
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, str(REPO_ROOT / script)], env=env, cwd=REPO_ROOT / Path(script).parent,
                                stdout=out, stderr=subprocess.STDOUT)


def agent_prepares(directory: Path) -> tuple[int, list[str]]:
    """What the agent does before (re)starting a command on a disk that survived."""
    newest = layouts.newest_complete(directory, writer_done=True)
    return (newest.step if newest else 0), layouts.prepare_for_resume(directory, newest.path if newest else None)


def steps_written(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if not p.name.startswith(".")} if directory.is_dir() else set()


@pytest.mark.parametrize("framework", sorted(SCRIPTS))
def test_killed_at_random_moments_around_its_saves_the_script_always_resumes(tmp_path: Path, framework: str) -> None:
    seed = int(os.environ.get("SPOT_KILL_SEED", random.randrange(2**31)))
    rng, replay = random.Random(seed), f"SPOT_KILL_SEED={seed}"
    directory, log = tmp_path / "checkpoints", tmp_path / "script.log"
    moved_aside: list[str] = []
    for kill in range(KILLS):
        resumed_at, hidden = agent_prepares(directory)
        moved_aside += hidden
        before = {name: _mtime(directory / name) for name in steps_written(directory)}
        process = start_script(framework, directory, log)
        try:
            # Wait for this run to start a save of a step beyond where it resumed, then kill it a random
            # moment later: at 0 it is inside the write, later ones land anywhere up to the next save.
            deadline = time.monotonic() + 120
            while not _new_save(directory, before, resumed_at):
                assert process.poll() is None, f"{replay}: run {kill} died after resuming at {resumed_at}:\n" \
                                               f"{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"{replay}: run {kill} saved nothing new"
                time.sleep(0.001)
            time.sleep(0 if kill == 0 else rng.uniform(0, 0.05))
            process.send_signal(signal.SIGKILL)
        finally:
            process.kill()
            process.wait()
    resumed_at, hidden = agent_prepares(directory)
    moved_aside += hidden
    final = start_script(framework, directory, log)
    assert final.wait(timeout=300) == 0, f"{replay}: the last run failed after resuming at {resumed_at} " \
                                         f"(moved aside: {moved_aside}):\n{log.read_text()[-3000:]}"
    assert f"finished at global step {STEPS}" in log.read_text(), replay


def _new_save(directory: Path, before: dict[str, float], resumed_at: int) -> bool:
    for name in steps_written(directory):
        step = layouts.step_of(directory / name)
        if step is not None and step > resumed_at and _mtime(directory / name) != before.get(name):
            return True
    return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return -1.0
