"""P9, its parts: where `--deterministic strict` loses samples per second on a GPU.

The built-in trainer runs as a user runs it, once per setting, each with one part of strict changed:
- `strict`: as shipped;
- `strict_with_fill`: torch's default under deterministic mode, every new tensor filled before use;
- `off`: as shipped;
- `off_with_cublas_workspace`: off, with cuBLAS on the fixed workspace that strict needs.
For the LM at context 512 and the ResNet, whose steps are short enough that the CPU launching kernels
sets the pace. Each figure is the median samples/s over the logged windows after the first. Prints
one JSON object; without CUDA it says so and measures nothing (on a CPU every setting runs the same).
Usage: `python benchmarks/p9_strict_parts.py` (a child runs with `--as-trainer PART …`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

CASES = {
    "lm_context_512": ["--model", "lm", "--width", "512", "--context", "512", "--batch-size", "32"],
    "resnet": ["--model", "resnet", "--width", "64", "--batch-size", "256"],
}
PARTS = {"strict": "strict", "strict_with_fill": "strict", "off": "off", "off_with_cublas_workspace": "off"}


def run_as_trainer(part: str, trainer_args: list[str]) -> int:
    """The trainer's own main, with one part of its kernel settings changed."""
    import torch.utils.deterministic

    from spot_trainer.builtin import loop

    configure = loop.configure_kernels

    def configure_for_part(mode: str, device: torch.device) -> None:
        configure(mode, device)
        if part == "strict_with_fill":
            torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]

    loop.configure_kernels = configure_for_part
    return loop.main(trainer_args)


def samples_per_second(part: str, case: list[str], steps: int, directory: Path) -> float:
    env = {key: value for key, value in os.environ.items() if key not in ("RESUME_FROM", "CUBLAS_WORKSPACE_CONFIG")}
    path = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env |= {"PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    if part == "off_with_cublas_workspace":
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    args = [*case, "--synthetic", "--steps", str(steps), "--log-every", str(max(1, steps // 10)),
            "--checkpoint-every-steps", str(steps), "--checkpoint-dir", str(directory), "--deterministic", PARTS[part]]
    done = subprocess.run([sys.executable, __file__, "--as-trainer", part, *args], env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"p9 parts: {part} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    rates = [event["samples_per_s"] for line in done.stdout.splitlines() if line.startswith("{")
             if (event := json.loads(line))["event"] == "step" and "samples_per_s" in event]
    return statistics.median(rates[1:] or rates)  # the first window holds start-up and kernel selection


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--as-trainer":
        sys.exit(run_as_trainer(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    report: dict[str, object] = {"benchmark": "p9_strict_parts", "torch": torch.__version__}
    if not torch.cuda.is_available():
        report["single_gpu"] = "not measured: no CUDA device (on a CPU every setting runs the same kernels)"
    else:
        report["gpu"] = torch.cuda.get_device_name()
        with TemporaryDirectory() as root:
            report["samples_per_s"] = {
                name: {part: samples_per_second(part, case, args.steps, Path(root) / f"{name}-{part}")
                       for part in PARTS}
                for name, case in CASES.items()}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
