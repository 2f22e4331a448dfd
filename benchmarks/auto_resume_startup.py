"""What the agent's auto-resume costs a command of the user's own: its sitecustomize runs at the start
of every Python process the command starts (the script, each data-loader worker, each torchrun rank).

Times `python -c pass` started from outside, with and without the startup folder first on PYTHONPATH
(and a checkpoint to resume from, so every hook is installed), alternating to share the machine's
noise, and `import transformers.trainer` with and without it (the patch itself included). Prints one
JSON object. Usage: python benchmarks/auto_resume_startup.py [--repeats 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from spot_trainer.agent.program.command import with_auto_resume
from stacks.help_text import first_paragraph


def started_in(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def median_ms(argv: list[str], plain: dict[str, str], hooked: dict[str, str], repeats: int) -> tuple[float, float]:
    times: dict[str, list[float]] = {"plain": [], "hooked": []}
    for _ in range(repeats):
        times["plain"].append(started_in(argv, plain))
        times["hooked"].append(started_in(argv, hooked))
    return (round(statistics.median(times["plain"]) * 1000, 1), round(statistics.median(times["hooked"]) * 1000, 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as checkpoints:
        plain = {**os.environ, "CHECKPOINT_DIR": checkpoints, "RESUME_FROM": f"{checkpoints}/checkpoint-1"}
        hooked = with_auto_resume(plain)
        bare_plain, bare_hooked = median_ms([sys.executable, "-c", "pass"], plain, hooked, args.repeats)
        hf_plain, hf_hooked = median_ms([sys.executable, "-c", "import transformers.trainer"], plain, hooked,
                                        max(3, args.repeats // 8))
    print(json.dumps({
        "benchmark": "auto_resume_startup",
        "python_start_ms": bare_plain, "python_start_with_auto_resume_ms": bare_hooked,
        "added_per_process_ms": round(bare_hooked - bare_plain, 1),
        "import_hf_trainer_ms": hf_plain, "import_hf_trainer_with_patch_ms": hf_hooked,
        "added_to_hf_import_ms": round(hf_hooked - hf_plain, 1),
        "repeats": args.repeats, "cpu_count": os.cpu_count(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
