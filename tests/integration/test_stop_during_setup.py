"""A rank of the built-in trainer asked to stop before training begins ends at once. Its state is still the
checkpoint it resumes from, so there is nothing to save, and its setup may be blocked in a collective
with a peer that is gone: torchrun re-forming a world stops every worker, and one still starting up
(a node that just joined) dies before it joins. Waiting there would hold the world until the collective
timeout, or until torchrun's 30 s kill."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from localcloud.moto_server import free_port
from tests.integration.agent_runner import REPO_ROOT

ARGS = ["--model", "lm", "--synthetic", "--steps", "30", "--width", "16", "--context", "16", "--batch-size", "12"]
COLLECTIVE_TIMEOUT = 300


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def rank_zero_of_two(directory: Path, port: int) -> subprocess.Popen[str]:
    """Rank 0 of a world of two whose rank 1 never comes: it waits in init_process_group."""
    env = {**os.environ, "CHECKPOINT_DIR": str(directory), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT),
           "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "SPOT_COLLECTIVE_TIMEOUT": str(COLLECTIVE_TIMEOUT)}
    env.pop("RESUME_FROM", None)
    return subprocess.Popen([sys.executable, "-m", "spot_trainer", "train", *ARGS], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_rank_stopped_while_waiting_for_its_peers_ends_at_once_and_writes_nothing(tmp_path: Path) -> None:
    port = free_port()
    rank = rank_zero_of_two(tmp_path / "checkpoints", port)
    try:
        deadline = time.monotonic() + 120
        while not listening(port):  # rank 0 hosts the store: it is in init_process_group now
            assert rank.poll() is None and time.monotonic() < deadline, rank.communicate()[1][-2000:]
            time.sleep(0.1)
        rank.send_signal(signal.SIGTERM)
        code = rank.wait(timeout=30)  # not COLLECTIVE_TIMEOUT
    finally:
        rank.kill()
        rank.communicate()
    assert code == -signal.SIGTERM
    assert not any((tmp_path / "checkpoints").glob("step-*")), "no step trained: nothing to save"
