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
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

from stacks.help_text import first_paragraph

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from benchmarks.p9_determinism_cost import base_env, samples_per_second, trainer_args  # noqa: E402

CASES = {
    "lm_context_512": ["--model", "lm", "--width", "512", "--context", "512", "--batch-size", "32"],
    "resnet": ["--model", "resnet", "--width", "64", "--batch-size", "256"],
}
PARTS = {"strict": "strict", "strict_with_fill": "strict", "off": "off", "off_with_cublas_workspace": "off"}


def run_as_trainer(part: str, argv: list[str]) -> int:
    """The trainer's own main, with one part of its kernel settings changed."""
    import torch.utils.deterministic

    from spot_trainer.builtin import loop

    configure = loop.configure_kernels

    def configure_for_part(mode: str, device: torch.device) -> None:
        configure(mode, device)
        if part == "strict_with_fill":
            torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]

    loop.configure_kernels = configure_for_part
    return loop.main(argv)


def part_rate(part: str, case: list[str], steps: int, directory: Path) -> float:
    env = base_env() | ({"CUBLAS_WORKSPACE_CONFIG": ":4096:8"} if part == "off_with_cublas_workspace" else {})
    command = [sys.executable, __file__, "--as-trainer", part, *trainer_args(case, steps, PARTS[part], directory)]
    return samples_per_second(command, env)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--as-trainer":
        sys.exit(run_as_trainer(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    report: dict[str, object] = {"benchmark": "p9_strict_parts", "torch": torch.__version__}
    if not torch.cuda.is_available():
        report["single_gpu"] = "not measured: no CUDA device (on a CPU every setting runs the same kernels)"
    else:
        report["gpu"] = torch.cuda.get_device_name()
        with TemporaryDirectory() as root:
            report["samples_per_s"] = {
                name: {part: part_rate(part, case, args.steps, Path(root) / f"{name}-{part}")
                       for part in PARTS}
                for name, case in CASES.items()}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
