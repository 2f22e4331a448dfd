"""What a resume loses when ranks other than 0 find no RNG file of their own.

On several nodes only the node holding global rank 0 publishes checkpoints, so what other ranks write
(HF Trainer's `rng_state_<rank>.pth`, Accelerate's `random_states_<rank>.pkl`) is never in S3, and a
resume starts those ranks from a fresh RNG state. This measures what that changes.

Two CPU processes under torchrun (gloo, OMP_NUM_THREADS=1) play two single-GPU nodes. For each
framework (an HF Trainer script, GPT-2 with its default dropout 0.1; an Accelerate loop of the
diffusers kind with dropout 0.1), in benchmarks/per_rank_rng/:

- uninterrupted: trains to step --steps, saving at --save-at;
- resumed, every file: resumes from a copy of that run's checkpoint at --save-at to --steps (the exact
  reference: a resume that loses nothing);
- resumed, rank 1's RNG file gone: the same, with rank 1's file deleted from the copy (what a resume
  from a published step sees).

Each resume is compared with the uninterrupted run: final weights (bit-identical, max abs difference,
L2 difference relative to the weights' norm, next to how far training moved them after --save-at),
loss with dropout off on held-out and on training rows, and per rank whether every resumed step drew
the same batch and gave the same loss. The missing file is also compared with the exact resume.
Prints one JSON object (45 to 90 s on 2 cores).

    .venv/bin/python benchmarks/rng_per_rank.py [--frameworks hf accelerate] [--steps 40 --save-at 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from stacks.help_text import first_paragraph

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

SCRIPTS = REPO_ROOT / "benchmarks/per_rank_rng"
ACCELERATE_MISSING = "Could not load random states"
# Each: the script and its arguments, rank 1's RNG file, what the framework says when it is missing.
FRAMEWORKS = {
    "hf": ([SCRIPTS / "hf_train.py"], "rng_state_1.pth", "Didn't find an RNG file for process 1"),
    "accelerate": ([SCRIPTS / "accelerate_train.py", "--seedable-sampler"], "random_states_1.pkl", ACCELERATE_MISSING),
    "accelerate_diffusers_sampler": ([SCRIPTS / "accelerate_train.py"], "random_states_1.pkl", ACCELERATE_MISSING),
}


def free_local_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def two_rank_env() -> dict[str, str]:
    """The parent's environment with nothing of Spot Trainer in it: the scripts run as plain user code."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("SPOT_")}
    # Logging as a script gets it by default: whether the missing file is said is part of the result.
    env.update(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", TQDM_DISABLE="1")
    return env


def train(script: list[Path | str], run_dir: Path, steps: int, save_at: int, resume_from: Path | None = None) -> str:
    """One torchrun world of two CPU ranks; returns what it printed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_local_port()), *map(str, script), str(run_dir),
               "--max-steps", str(steps), "--save-steps", str(save_at)]
    if resume_from is not None:
        command += ["--resume-from", str(resume_from)]
    done = subprocess.run(command, env=two_rank_env(), cwd=run_dir, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        said = f"{done.stdout[-3000:]}{done.stderr[-6000:]}"
        raise SystemExit(f"rng_per_rank: {' '.join(map(str, script))} failed ({done.returncode}):\n{said}")
    return done.stdout + done.stderr


def weights_vector(weights: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    return torch.cat([weights[name].double().flatten() for name in names])


def compare_weights(run: dict[str, torch.Tensor], reference: dict[str, torch.Tensor],
                    names: list[str]) -> dict[str, object]:
    ours, theirs = weights_vector(run, names), weights_vector(reference, names)
    return {"bit_identical": all(torch.equal(run[name], reference[name]) for name in names),
            "max_abs_difference": float((ours - theirs).abs().max()),
            "relative_l2_difference": float((ours - theirs).norm() / theirs.norm())}


def compare_steps(run: list[dict], reference: list[dict]) -> dict[str, object]:
    """The resumed steps of one rank against the same steps of the reference."""
    losses = torch.tensor([record["loss"] for record in run], dtype=torch.float64)
    reference_losses = torch.tensor([record["loss"] for record in reference], dtype=torch.float64)
    return {"steps": len(run),
            "same_batches": [record["batch"] for record in run] == [record["batch"] for record in reference],
            "first_step_loss_identical": run[0]["loss"] == reference[0]["loss"],
            "steps_with_identical_loss": sum(ours == theirs for ours, theirs in zip(run, reference, strict=True)),
            "mean_abs_loss_difference": float((losses - reference_losses).abs().mean())}


class Run:
    """What one torchrun world left in its folder."""

    def __init__(self, run_dir: Path, printed: str, seconds: float) -> None:
        self.dir, self.printed, self.seconds = run_dir, printed, seconds
        self.weights: dict[str, torch.Tensor] = torch.load(run_dir / "final.pt")
        self.metrics: dict[str, float] = json.loads((run_dir / "metrics.json").read_text())
        self.records = [json.loads((run_dir / f"records_{rank}.json").read_text()) for rank in (0, 1)]


def compare_runs(run: Run, reference: Run, names: list[str]) -> dict[str, object]:
    same_steps = [reference.records[rank][-len(run.records[rank]):] for rank in (0, 1)]
    return {**compare_weights(run.weights, reference.weights, names),
            "eval_loss_difference": run.metrics["eval_loss"] - reference.metrics["eval_loss"],
            "train_loss_difference": run.metrics["train_loss"] - reference.metrics["train_loss"],
            "resumed_steps": {f"rank_{rank}": compare_steps(run.records[rank], same_steps[rank]) for rank in (0, 1)}}


def timed_train(script: list[Path | str], run_dir: Path, steps: int, save_at: int,
                resume_from: Path | None = None) -> Run:
    started = time.monotonic()
    printed = train(script, run_dir, steps, save_at, resume_from)
    return Run(run_dir, printed, round(time.monotonic() - started, 1))


def measure(framework: str, scratch: Path, steps: int, save_at: int) -> dict[str, object]:
    script, rank_1_file, missing_message = FRAMEWORKS[framework]
    uninterrupted = timed_train(script, scratch / framework / "uninterrupted", steps, save_at)
    saved = uninterrupted.dir / f"checkpoint-{save_at}"
    resumes: dict[str, Run] = {}
    for name, drop in (("resumed_every_file", None), ("resumed_without_rank_1_rng", rank_1_file)):
        run_dir = scratch / framework / name
        start = shutil.copytree(saved, run_dir / saved.name)
        if drop is not None:
            (start / drop).unlink()
        resumes[name] = timed_train(script, run_dir, steps, save_at, start)
    saved_weights = load_file(saved / "model.safetensors")
    names = sorted(saved_weights)  # a tied weight is saved once
    moved = compare_weights(uninterrupted.weights, saved_weights, names)["relative_l2_difference"]
    exact, without = resumes["resumed_every_file"], resumes["resumed_without_rank_1_rng"]
    return {"weights_compared": len(names), "parameters": sum(saved_weights[name].numel() for name in names),
            "uninterrupted_eval_loss": uninterrupted.metrics["eval_loss"],
            "uninterrupted_train_loss": uninterrupted.metrics["train_loss"],
            "relative_l2_change_of_weights_after_save": moved,
            **{name: compare_runs(run, uninterrupted, names) for name, run in resumes.items()},
            "without_rank_1_rng_against_exact_resume": compare_weights(without.weights, exact.weights, names),
            "missing_file_said_by_default": missing_message in without.printed,
            "seconds": {"uninterrupted": uninterrupted.seconds, **{name: run.seconds for name, run in resumes.items()}}}


def library_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("torch", "transformers", "accelerate")}


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--frameworks", nargs="+", choices=sorted(FRAMEWORKS), default=sorted(FRAMEWORKS))
    parser.add_argument("--steps", type=int, default=40, help="the step every run ends at")
    parser.add_argument("--save-at", type=int, default=20, help="the step both resumes start from")
    args = parser.parse_args()
    results: dict[str, object] = {"benchmark": "rng_per_rank", "ranks": 2, "steps": args.steps,
                                  "resumed_at": args.save_at, "versions": library_versions()}
    with TemporaryDirectory() as scratch:
        for framework in args.frameworks:
            results[framework] = measure(framework, Path(scratch), args.steps, args.save_at)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
