"""P9: what exactness costs, `--deterministic strict` against `off`, in training samples per second.

On a GPU: the built-in trainer alone, for the LM at context 512 (width 512) and 1024 (width 768) in
bf16, and the ResNet; strict makes every CUDA kernel deterministic (attention's backward pass included),
off lets cuDNN autotune. Anywhere: a torchrun world of three CPU ranks (gloo), where strict adds the
ranks' gradients in rank order (a gather) instead of DDP's all-reduce. Each figure is the median
samples/s over the logged windows after the first. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

from stacks.help_text import first_paragraph

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

GPU_CASES = {
    "lm_context_512": ["--model", "lm", "--width", "512", "--context", "512", "--batch-size", "32"],
    "lm_context_1024": ["--model", "lm", "--width", "768", "--context", "1024", "--batch-size", "32"],
    "resnet": ["--model", "resnet", "--width", "64", "--batch-size", "256"],
}
WORLD_CASE = ["--model", "lm", "--width", "32", "--context", "32", "--batch-size", "24"]
MODES = ("strict", "off")


def samples_per_second(command: list[str], env: dict[str, str]) -> float:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"p9: {' '.join(command[-12:])} failed: {failure_lines(done.stderr)}")
    rates = [event["samples_per_s"] for line in done.stdout.splitlines() if line.startswith("{")
             if (event := json.loads(line))["event"] == "step" and "samples_per_s" in event]
    return statistics.median(rates[1:] or rates)  # the first window holds start-up and kernel selection


def failure_lines(stderr: str) -> list[str]:
    """The lines that say why: the trainer's own `error:` lines or an exception, not torchrun's closing banner."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not set(line.strip()) <= set("=-")]
    return [line for line in lines if line.startswith("error:") or "Error" in line][-3:] or lines[-3:]


def trainer_args(case: list[str], steps: int, mode: str, directory: Path) -> list[str]:
    return [*case, "--synthetic", "--steps", str(steps), "--log-every", str(max(1, steps // 10)),
            "--checkpoint-every-steps", str(steps), "--checkpoint-dir", str(directory), "--deterministic", mode]


def base_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("RESUME_FROM", "CUBLAS_WORKSPACE_CONFIG")}
    path = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])  # `make gpu-check` links it
    return env | {"PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def compare(command: Callable[[str], list[str]], env: dict[str, str]) -> dict[str, float]:
    rates = {mode: samples_per_second(command(mode), env) for mode in MODES}
    return {**{f"{mode}_samples_per_s": rate for mode, rate in rates.items()},
            "strict_cost_percent": round(100 * (1 - rates["strict"] / rates["off"]), 1)}


def gpu_figures(steps: int, root: Path) -> dict[str, dict[str, float]]:
    trainer = [sys.executable, "-m", "spot_trainer.builtin.loop"]
    return {name: compare(lambda mode, name=name, case=case: [
        *trainer, *trainer_args(case, steps, mode, root / f"{name}-{mode}")], base_env())
        for name, case in GPU_CASES.items()}


def world_figures(steps: int, ranks: int, root: Path) -> dict[str, float]:
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
                "-m", "spot_trainer", "train"]
    env = base_env() | {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    return {**compare(lambda mode: [*torchrun, *trainer_args(WORLD_CASE, steps, mode, root / f"world-{mode}")], env),
            "ranks": ranks}


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--gpu-steps", type=int, default=300)
    parser.add_argument("--world-steps", type=int, default=60)
    parser.add_argument("--ranks", type=int, default=3)
    args = parser.parse_args()
    with TemporaryDirectory() as root:
        report: dict[str, object] = {"benchmark": "p9_determinism_cost", "torch": torch.__version__}
        if torch.cuda.is_available():
            report["gpu"] = torch.cuda.get_device_name()
            report["single_gpu"] = gpu_figures(args.gpu_steps, Path(root))
        else:
            report["single_gpu"] = "not measured: no CUDA device (on a CPU strict and off run the same kernels)"
        report["cpu_world"] = world_figures(args.world_steps, args.ranks, Path(root))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
