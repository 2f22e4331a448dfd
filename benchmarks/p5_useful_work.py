"""P5: useful work under interruptions versus the Young/Daly optimum 1 − √(2C/M).

The built-in trainer runs as a real process and is SIGKILLed (no notice: every kill loses the work
since its last checkpoint) at exponential intervals of mean M seconds of training, then restarted
from its checkpoint directory until all steps are done. Its checkpoint interval is Young's
τ = √(2CM), with C from a short calibration run (saves every 1.5 s).

Every figure comes from the trainer's own step clock in the run itself (batch ÷ samples_per_s
with --log-every 1), so a machine whose load drifts between runs does not skew them: t is the mean
step time of steps no save overlaps; C is what one checkpoint costs the loop (the steps its save
overlaps, minus t each);
useful work is steps × t ÷ time in the training loop (redone steps, the partial step a kill throws
away and checkpoint cost included; process start-up between attempts is reported apart, as
Young/Daly leave restarts out). Target: within 10% of 1 − √(2C/M).

    python benchmarks/p5_useful_work.py [--mtbi 30] [--training-seconds 120] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from stacks.help_text import first_paragraph

BATCH = 16
MODEL_ARGS = ["--model", "resnet", "--synthetic", "--batch-size", str(BATCH), "--width", "8", "--log-every", "1"]


@dataclass
class Attempt:
    """One trainer process. Step durations come from the trainer's own clock (batch ÷ samples_per_s
    with --log-every 1, the save's stall included in the step after it), not from when the lines
    arrive here, which a busy machine delays and bunches."""

    process: subprocess.Popen[bytes]
    durations: dict[int, float] = field(default_factory=dict)  # step → seconds
    saves: list[tuple[int, float]] = field(default_factory=list)  # (step, stall + background write seconds)
    first_step_at: float | None = None
    last_step_at: float | None = None
    started_at: float = field(default_factory=time.perf_counter)
    ended_at: float = 0.0
    done: bool = False

    def read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            now = time.perf_counter()
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if event.get("event") == "step":
                self.durations[int(event["step"])] = BATCH / float(event["samples_per_s"])
                self.first_step_at = self.first_step_at or now
                self.last_step_at = now
            elif event.get("event") == "checkpoint":
                self.saves.append((int(event["step"]), float(event["write_s"]) + float(event["stall_s"])))
            elif event.get("event") == "done":
                self.done = True

    def loop_seconds(self) -> float:
        """Training-loop time: every step, plus the partial step a kill threw away."""
        tail = 0.0 if self.done or self.last_step_at is None else max(0.0, self.ended_at - self.last_step_at)
        return sum(self.durations.values()) + tail


def start(args: list[str], directory: Path) -> Attempt:
    process = subprocess.Popen(
        [sys.executable, "-m", "spot_trainer", "train", *MODEL_ARGS, *args, "--checkpoint-dir", str(directory)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "RESUME_FROM": ""},
    )
    attempt = Attempt(process)
    threading.Thread(target=attempt.read, daemon=True).start()
    return attempt


def save_windows(attempt: Attempt) -> list[list[int]]:
    """For each save, the steps it overlaps: the one after it (its stall) on until its write is done."""
    windows = []
    for saved, seconds in attempt.saves:
        covered, following, steps = 0.0, saved + 1, []
        while covered < seconds and following in attempt.durations:
            covered += attempt.durations[following]
            steps.append(following)
            following += 1
        if steps:  # the final save has no steps after it
            windows.append(steps)
    return windows


def timing(attempts: list[Attempt]) -> tuple[float, float]:
    """(t, C): mean time of a step no save overlaps, and mean extra loop time per save."""
    clean, extra = [], []
    for attempt in attempts:
        windows = save_windows(attempt)
        touched = {step for window in windows for step in window}
        clean += [d for step, d in attempt.durations.items() if step not in touched]
        extra += [[attempt.durations[step] for step in window] for window in windows]
    step = statistics.fmean(clean)
    return step, statistics.fmean(sum(d - step for d in window) for window in extra) if extra else 0.0


def run_once(args: list[str]) -> Attempt:
    with tempfile.TemporaryDirectory() as directory:
        attempt = start(args, Path(directory))
        attempt.process.wait()
        time.sleep(0.1)  # let the reader drain the pipe
    return attempt


def calibrate(seconds: float) -> tuple[float, float]:
    """(t, C) before the real run: a clean probe for t, then saves every 1.5 s for C."""
    probe = run_once(["--steps", "30", "--checkpoint-every-steps", "100000"])
    step = statistics.fmean(probe.durations.values())
    saving = run_once(["--steps", str(max(30, round(seconds / step))), "--checkpoint-every-seconds", "1.5"])
    return step, max(timing([saving])[1], 1e-3)


def run_with_kills(steps: int, interval: float, mtbi: float, rng: random.Random) -> list[Attempt]:
    attempts: list[Attempt] = []
    with tempfile.TemporaryDirectory() as directory:
        while True:
            attempt = start(["--steps", str(steps), "--checkpoint-every-seconds", f"{interval:.4f}"], Path(directory))
            attempts.append(attempt)
            budget = rng.expovariate(1 / mtbi)
            while attempt.process.poll() is None:
                if attempt.first_step_at and time.perf_counter() - attempt.first_step_at >= budget:
                    os.killpg(attempt.process.pid, signal.SIGKILL)
                    break
                time.sleep(0.005)
            attempt.process.wait()
            attempt.ended_at = time.perf_counter()
            time.sleep(0.05)  # let the reader drain the pipe
            if attempt.process.returncode == 0 and attempt.done:
                return attempts
            if attempt.process.returncode != -signal.SIGKILL:
                raise RuntimeError(f"trainer failed with exit code {attempt.process.returncode}")


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--mtbi", type=float, default=30.0, help="mean seconds of training between kills (M)")
    parser.add_argument("--training-seconds", type=float, default=120.0, help="clean training time of the job")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    probe_step, calibrated = calibrate(12.0)
    interval = math.sqrt(2 * calibrated * options.mtbi)  # Young's optimum τ
    steps = max(20, round(options.training_seconds / probe_step))
    attempts = run_with_kills(steps, interval, options.mtbi, random.Random(options.seed))
    step, cost = timing(attempts)
    loop = sum(a.loop_seconds() for a in attempts)
    restarts = sum(a.ended_at - a.started_at for a in attempts) - loop
    useful = steps * step / loop
    optimum = 1 - math.sqrt(2 * cost / options.mtbi)
    print(json.dumps({
        "benchmark": "p5_useful_work",
        "mtbi_seconds": options.mtbi,
        "step_seconds": round(step, 5),
        "checkpoint_cost_seconds": round(cost, 5),
        "calibrated_checkpoint_cost_seconds": round(calibrated, 5),
        "checkpoint_interval_seconds": round(interval, 3),
        "checkpoints": sum(len(a.saves) for a in attempts),
        "steps": steps,
        "kills": len(attempts) - 1,
        "loop_seconds": round(loop, 2),
        "restart_seconds_excluded": round(restarts, 2),
        "useful_work_fraction": round(useful, 4),
        "young_daly_optimum": round(optimum, 4),
        "first_order_prediction_at_interval": round(1 - cost / interval - interval / (2 * options.mtbi), 4),
        "ratio_to_optimum": round(useful / optimum, 4),
        "within_10_percent": abs(useful / optimum - 1) <= 0.10,
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
