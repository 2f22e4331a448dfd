"""P5: useful work under interruptions versus the Young/Daly optimum 1 − √(2C/M).

The built-in trainer runs as a real process and is SIGKILLed (no notice: every kill loses the work
since its last checkpoint) at exponential intervals of mean M seconds of training, then restarted
from its checkpoint directory until all steps are done. Measured first: the clean step time t and
the checkpoint cost C (extra seconds per checkpoint, background write included); the checkpoint
interval is then Young's τ = √(2CM).

useful work = steps × t ÷ time spent in the training loop (redone steps and checkpoint cost
included; process start-up between attempts is reported apart: Young/Daly leave restarts out).
Target: within 10% of 1 − √(2C/M).

    python benchmarks/p5_useful_work.py [--mtbi 30] [--training-seconds 150] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

MODEL_ARGS = ["--model", "resnet", "--synthetic", "--batch-size", "16", "--width", "8", "--log-every", "1"]


@dataclass
class Attempt:
    """One trainer process: when each step event arrived, how it ended."""

    process: subprocess.Popen[bytes]
    step_times: list[tuple[int, float]] = field(default_factory=list)
    started_at: float = field(default_factory=time.perf_counter)
    done: bool = False

    def read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if event.get("event") == "step":
                self.step_times.append((int(event["step"]), time.perf_counter()))
            elif event.get("event") == "done":
                self.done = True


def start(args: list[str], directory: Path) -> Attempt:
    process = subprocess.Popen(
        [sys.executable, "-m", "trainer", "train", *MODEL_ARGS, *args, "--checkpoint-dir", str(directory)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "RESUME_FROM": ""},
    )
    attempt = Attempt(process)
    threading.Thread(target=attempt.read, daemon=True).start()
    return attempt


def seconds_per_step(extra: list[str], steps: int) -> float:
    """Mean step time over a run, the first (warm-up) steps left out."""
    with tempfile.TemporaryDirectory() as directory:
        attempt = start(["--steps", str(steps), *extra], Path(directory))
        attempt.process.wait()
        time.sleep(0.1)
    times = [t for step, t in attempt.step_times if step > 3]
    return (times[-1] - times[0]) / (len(times) - 1)


def run_with_kills(steps: int, interval: float, mtbi: float, rng: random.Random, step_time: float) -> dict:
    loop_seconds, restart_seconds, kills = 0.0, 0.0, 0
    with tempfile.TemporaryDirectory() as directory:
        while True:
            attempt = start(["--steps", str(steps), "--checkpoint-every-seconds", f"{interval:.4f}"], Path(directory))
            budget = rng.expovariate(1 / mtbi)
            loop_start = None
            while attempt.process.poll() is None:
                if loop_start is None and attempt.step_times:
                    loop_start = attempt.step_times[0][1] - step_time  # the loop began one step earlier
                if loop_start is not None and time.perf_counter() - loop_start >= budget:
                    os.killpg(attempt.process.pid, signal.SIGKILL)
                    attempt.process.wait()
                    kills += 1
                    break
                time.sleep(0.005)
            ended = time.perf_counter()
            time.sleep(0.05)  # let the reader drain the pipe
            if loop_start is not None:
                loop_seconds += ended - loop_start
                restart_seconds += loop_start - attempt.started_at
            if attempt.process.returncode == 0 and attempt.done:
                return {"loop_seconds": loop_seconds, "restart_seconds": restart_seconds, "kills": kills}
            if attempt.process.returncode not in (0, -signal.SIGKILL):
                raise RuntimeError(f"trainer failed with exit code {attempt.process.returncode}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mtbi", type=float, default=30.0, help="mean seconds of training between kills (M)")
    parser.add_argument("--training-seconds", type=float, default=150.0, help="clean training time of the job")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    clean = seconds_per_step(["--checkpoint-every-steps", "100000"], 40)
    every_step = seconds_per_step(["--checkpoint-every-steps", "1"], 40)
    cost = max(every_step - clean, 1e-4)  # C: what one checkpoint adds to the step it is taken at
    interval = math.sqrt(2 * cost * options.mtbi)  # Young's optimum τ
    steps = max(20, round(options.training_seconds / clean))
    measured = run_with_kills(steps, interval, options.mtbi, random.Random(options.seed), clean)
    useful = steps * clean / measured["loop_seconds"]
    optimum = 1 - math.sqrt(2 * cost / options.mtbi)
    print(json.dumps({
        "benchmark": "p5_useful_work",
        "mtbi_seconds": options.mtbi,
        "step_seconds": round(clean, 5),
        "checkpoint_cost_seconds": round(cost, 5),
        "checkpoint_interval_seconds": round(interval, 3),
        "steps": steps,
        "kills": measured["kills"],
        "loop_seconds": round(measured["loop_seconds"], 2),
        "restart_seconds_excluded": round(measured["restart_seconds"], 2),
        "useful_work_fraction": round(useful, 4),
        "young_daly_optimum": round(optimum, 4),
        "ratio_to_optimum": round(useful / optimum, 4),
        "within_10_percent": abs(useful / optimum - 1) <= 0.10,
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
