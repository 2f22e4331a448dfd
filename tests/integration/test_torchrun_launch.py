"""How a node's torchrun ends, as the agent and the user's logs see it: one line saying why, the exit
code the agent acts on, and no Python traceback for what is a routine end of a round or a stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.agent_runner import REPO_ROOT

WORKER = """
import pathlib, sys, time
pathlib.Path(sys.argv[1]).write_text("up")
if sys.argv[2] == "exit":
    sys.exit(75)
time.sleep(120)
"""


def launch(tmp_path: Path, mode: str) -> subprocess.Popen[str]:
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "spot_trainer.distributed.launch", "--standalone",
                             "--nproc-per-node=1", "--max-restarts=0", str(worker), str(tmp_path / "up"), mode],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_rank_that_ends_the_round_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    _, stderr = (process := launch(tmp_path, "exit")).communicate(timeout=120)
    assert process.returncode == 1
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "torchrun: rank 0 exited with code 75; this round is over"


def test_the_agents_stop_signal_is_one_line_once_the_workers_are_gone(tmp_path: Path) -> None:
    process = launch(tmp_path, "sleep")
    deadline = time.monotonic() + 60
    while not (tmp_path / "up").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-2000:]
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "torchrun: stopped by SIGTERM"
