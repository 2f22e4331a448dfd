"""P3: how long a replacement instance takes to train again, versus fetching the checkpoint by hand.

Against one local moto server and the same checkpoint in the same run, it times
  agent:  `python -m spot_trainer agent` start → first training step after the resume (lease, restore with
          verification, trainer start-up, model build, state load, one step)
  plain:  boto3 download_file of every object of the checkpoint + torch.load, in this process
  plain_fresh_process: the same as a new Python process, timed from outside (interpreter start
          and the torch import included), the floor for anything that starts on a new instance
  trainer_alone: the built-in trainer resuming from the same checkpoint already on local disk,
          so `agent_added_s` (agent − trainer_alone) is what the agent itself costs; it does the work of
          `plain` (download, verify) plus its own start, lease and process launch
and prints one JSON object. Usage: python benchmarks/p3_resume_start.py [--width 384] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from stacks.help_text import first_paragraph

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from localcloud.fake_imds import FakeImds  # noqa: E402
from localcloud.moto_server import MotoServer  # noqa: E402
from spot_trainer.storage.s3.s3client import s3_client  # noqa: E402
from spot_trainer.storage.steps.remote import RemoteStore  # noqa: E402

BUCKET = "p3-resume-start"

PLAIN = """
import sys, boto3, torch
from pathlib import Path
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
bucket, prefix, dest = sys.argv[2], sys.argv[3], Path(sys.argv[4])
for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]:
    target = dest / item["Key"][len(prefix):]
    target.parent.mkdir(parents=True, exist_ok=True)
    s3.download_file(bucket, item["Key"], str(target))
state = torch.load(dest / "state.pt", map_location="cpu", weights_only=True)
"""


def train_args(width: int, steps: int) -> list[str]:
    return ["--model", "lm", "--synthetic", "--width", str(width), "--context", "64", "--batch-size", "8",
            "--steps", str(steps), "--checkpoint-every-steps", str(steps), "--log-every", "1"]


def make_checkpoint(work: Path, width: int, steps: int) -> Path:
    env = {**os.environ, "CHECKPOINT_DIR": str(work / "seed")}
    subprocess.run([sys.executable, "-m", "spot_trainer", "train", *train_args(width, steps)], env=env, check=True,
                   cwd=REPO_ROOT, capture_output=True)
    return work / "seed" / f"step-{steps:08d}"


def time_agent(server: MotoServer, work: Path, width: int, steps: int, trial: int) -> dict[str, float]:
    """Seconds from starting the agent to its command's first step after the resume (job p3-<trial>)."""
    with FakeImds(instance_id=f"i-p3-{trial}") as imds:
        env = {**os.environ, **server.env(), "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url,
               "SPOT_JOB": f"p3-{trial}", "SPOT_BUCKET": BUCKET, "SPOT_COMMAND": "builtin",
               "SPOT_TRAIN_ARGS": " ".join(train_args(width, steps + 1000)),
               "SPOT_CHECKPOINT_DIR": str(work / f"agent-{trial}"), "SPOT_INSTANCE_ID": f"i-p3-{trial}",
               "SPOT_POLL_SECONDS": "0.2", "SPOT_LEASE_TTL_SECONDS": "10", "PYTHONUNBUFFERED": "1"}
        started = time.perf_counter()
        agent = subprocess.Popen([sys.executable, "-m", "spot_trainer", "agent"], env=env, cwd=REPO_ROOT,
                                 text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert agent.stdout is not None and agent.stderr is not None
        launched: list[float] = []
        watcher = threading.Thread(target=note_launch, args=(agent.stderr, started, launched), daemon=True)
        watcher.start()
        resumed_at = first_step_at = None
        for line in agent.stdout:
            if '"event": "resumed"' in line:
                resumed_at = time.perf_counter() - started
            if '"event": "step"' in line:
                first_step_at = time.perf_counter() - started
                break
        imds.announce_interruption(in_seconds=120)  # end the run the way a spot instance would
        agent.stdout.read()
        agent.wait(timeout=120)
        watcher.join(timeout=10)
    if first_step_at is None or resumed_at is None or not launched:
        raise SystemExit(f"agent trial {trial} never resumed (exit {agent.returncode})")
    return {"first_step_s": first_step_at, "resumed_s": resumed_at, "launch_s": launched[0]}


def note_launch(stderr: IO[str], started: float, launched: list[float]) -> None:
    """When the agent launched the command (lease taken, checkpoint restored and verified)."""
    for line in stderr:
        if line.startswith("spot-trainer: starting ") and not launched:
            launched.append(time.perf_counter() - started)


def time_trainer_alone(work: Path, checkpoint: Path, width: int, steps: int) -> float:
    """The built-in trainer resuming from a checkpoint already on disk: start → first step."""
    local = work / "local-resume"
    shutil.copytree(checkpoint, local / checkpoint.name, dirs_exist_ok=True)
    started = time.perf_counter()
    trainer = subprocess.Popen([sys.executable, "-m", "spot_trainer", "train", *train_args(width, steps + 1000)],
                               env={**os.environ, "CHECKPOINT_DIR": str(local)}, cwd=REPO_ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert trainer.stdout is not None
    elapsed = None
    for line in trainer.stdout:
        if '"event": "step"' in line:
            elapsed = time.perf_counter() - started
            break
    trainer.kill()
    trainer.wait()
    if elapsed is None:
        raise SystemExit("the trainer never stepped after resuming from a local checkpoint")
    return elapsed


def time_plain(server: MotoServer, work: Path, prefix: str, trial: int, fresh_process: bool) -> float:
    dest = work / f"plain-{'proc' if fresh_process else 'inproc'}-{trial}"
    if fresh_process:  # wall time of the whole process: interpreter, imports, download, load
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", PLAIN, server.endpoint, BUCKET, prefix, str(dest)],
                       env={**os.environ, **server.env()}, check=True, capture_output=True, text=True)
        return time.perf_counter() - started
    import boto3
    import torch

    started = time.perf_counter()
    s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")
    for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]:
        target = dest / item["Key"][len(prefix):]
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(BUCKET, item["Key"], str(target))
    torch.load(dest / "state.pt", map_location="cpu", weights_only=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--width", type=int, default=384, help="ByteLM width (384 → ~44 MB checkpoint)")
    parser.add_argument("--steps", type=int, default=3, help="steps trained before the checkpoint")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="p3-") as tmp, MotoServer() as server:
        work = Path(tmp)
        os.environ.update(server.env())
        s3 = s3_client(endpoint_url=server.endpoint, region="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        checkpoint = make_checkpoint(work, args.width, args.steps)
        for trial in range(args.repeats):  # one job per trial: every trial restores the same bytes
            RemoteStore(s3, BUCKET, f"p3-{trial}").upload(checkpoint, args.steps)
        prefix = RemoteStore(s3, BUCKET, "p3-0").step_prefix(args.steps)
        size = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
        agent, plain, fresh, alone = [], [], [], []
        for trial in range(args.repeats):
            agent.append(time_agent(server, work, args.width, args.steps, trial))
            alone.append(time_trainer_alone(work, checkpoint, args.width, args.steps))
            plain.append(time_plain(server, work, prefix, trial, fresh_process=False))
            fresh.append(time_plain(server, work, prefix, trial, fresh_process=True))
        first = statistics.median(a["first_step_s"] for a in agent)
        launch = statistics.median(a["launch_s"] for a in agent)
        trainer_alone = statistics.median(alone)
        result = {
            "benchmark": "p3_resume_start",
            "checkpoint_bytes": size,
            "repeats": args.repeats,
            "agent_start_to_first_resumed_step_s": round(first, 3),
            "agent_start_to_resumed_event_s": round(statistics.median(a["resumed_s"] for a in agent), 3),
            "plain_download_and_load_s": round(statistics.median(plain), 3),
            "plain_fresh_process_total_s": round(statistics.median(fresh), 3),
            "agent_start_to_command_launch_s": round(launch, 3),
            "trainer_alone_local_resume_to_first_step_s": round(trainer_alone, 3),
            "agent_added_s": round(first - trainer_alone, 3),
            "agent_added_over_plain_download_and_load":
                round((first - trainer_alone) / statistics.median(plain), 2),
            "agent_trials_s": [round(a["first_step_s"], 3) for a in agent],
            "cpu_count": os.cpu_count(),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
