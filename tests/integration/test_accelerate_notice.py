"""An Accelerate loop with `save_on_notice` as a torchrun world (gloo on CPU, real processes): a stop
signal to one rank, as a spot notice to one node, stops every rank at the same step, and the world
saves that step once, with every rank's RNG state, as a folder the agent takes for whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from spot_trainer.storage.saves.layouts import newest_complete
from tests.integration.agent_runner import REPO_ROOT, descendants

SCRIPT = REPO_ROOT / "tests/fixtures/plain_scripts/accelerate_train.py"


def events(output: str, kind: str) -> list[dict]:
    return [record for line in output.splitlines() if line.startswith("{")
            and (record := json.loads(line)).get("event") == kind]


def torchrun(output_dir: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(SCRIPT),
         "--output_dir", str(output_dir), "--max_train_steps", "1000000", *args],
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO_ROOT),
             "ACC_SAVE_ON_NOTICE": "on", **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def stopped_step(output: str) -> int:
    """The one step every rank stopped at, saved once (rank 0's emergency_checkpoint line)."""
    stops = events(output, "group_stop")
    assert sorted(e["rank"] for e in stops) == [0, 1] and len({e["step"] for e in stops}) == 1, output[-3000:]
    assert [e["step"] for e in events(output, "emergency_checkpoint")] == [stops[0]["step"]], output[-3000:]
    return int(stops[0]["step"])


def test_a_signal_to_one_rank_stops_the_world_at_one_step_saved_once(tmp_path: Path) -> None:
    process = torchrun(tmp_path, "--checkpointing_steps", "100000")
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith('{"event": "step"') and json.loads(line)["step"] >= 50:
            workers = [pid for pid in descendants(process.pid)
                       if b"accelerate_train" in Path(f"/proc/{pid}/cmdline").read_bytes()]
            os.kill(max(workers), signal.SIGTERM)  # one rank only, as a notice reaches one node
            break
    rest, _ = process.communicate(timeout=120)
    output = "".join(lines) + rest

    saved = tmp_path / f"checkpoint-{stopped_step(output)}"
    assert {"random_states_0.pkl", "random_states_1.pkl"} <= {p.name for p in saved.iterdir()}, output[-3000:]
    complete = newest_complete(tmp_path, writer_done=True)
    assert complete is not None and complete.path == saved


def test_a_notice_at_a_save_of_rank_0_alone_does_not_write_it_again(tmp_path: Path) -> None:
    # The diffusers scripts save under is_main_process: rank 1 never sees the folder of that step.
    output, _ = torchrun(tmp_path, "--checkpointing_steps", "10", "--main_saves", ACC_SIGNAL_AT="10").communicate(
        timeout=120)
    assert stopped_step(output) == 10
    [saved_at] = [float(line.split(" at ")[1]) for line in output.splitlines()
                  if line.startswith("saved checkpoint-10")]
    # The agent may be uploading those files: rewriting them could tear its copy.
    assert (tmp_path / "checkpoint-10/model.safetensors").stat().st_mtime <= saved_at, output[-3000:]
