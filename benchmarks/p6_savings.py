"""P6: savings versus on-demand at a 70% spot discount and 5% of instances interrupted per hour.

Runs the demo in the local spot cloud (real CDK deploy to moto, real instance processes, announced
interruptions) and takes from its report what interruptions and checkpoints cost there:
  f  checkpoint overhead (training time stalled in checkpoint saves ÷ training time)
  O  instance-seconds lost per interruption: all instance time beyond the uninterrupted run
     (notice windows, replacement boots, restores, redone steps) ÷ interruptions
A job of H on-demand hours interrupted at rate r per hour then bills H·(1 + f) + r·H·(1 + f)·O/3600
spot hours at (1 − d) of the on-demand price:  savings = 1 − (1 − d)·(1 + f)·(1 + r·O/3600).
The same formula is also given for O on AWS, where a replacement boots in minutes, not seconds
(--aws-replacement-seconds, default 600). Target: savings ≥ 65%.

    python benchmarks/p6_savings.py [--report demo.json] [--interruptions 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from stacks.help_text import first_paragraph

REPO_ROOT = Path(__file__).resolve().parent.parent


def savings(discount: float, overhead: float, rate_per_hour: float, seconds_per_interruption: float) -> float:
    return 1 - (1 - discount) * (1 + overhead) * (1 + rate_per_hour * seconds_per_interruption / 3600)


def demo_report(interruptions: int) -> dict:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "report.json"
        done = subprocess.run(
            [sys.executable, "-m", "localcloud", "demo", "--job", "example", "--interruptions", str(interruptions),
             "--json", str(path)], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0 or not path.exists():
            tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
            raise SystemExit(f"p6: the demo failed: {tail[0]}")
        return json.loads(path.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--report", type=Path, default=None, help="a demo's --json report instead of a new run")
    parser.add_argument("--interruptions", type=int, default=2)
    parser.add_argument("--discount", type=float, default=0.70)
    parser.add_argument("--rate", type=float, default=0.05, help="interruptions per instance-hour")
    parser.add_argument("--aws-replacement-seconds", type=float, default=600.0)
    options = parser.parse_args()
    report = json.loads(options.report.read_text()) if options.report else demo_report(options.interruptions)
    if report["state"] != "DONE" or not report["interruptions"]:
        raise SystemExit(f"p6: the demo run must finish (DONE) with interruptions; got {report['state']}")
    overhead = report["checkpoint_overhead"]
    extra = report["instance_seconds"] - report["on_demand_equivalent_seconds"]
    per_interruption = max(0.0, extra) / report["interruptions"]
    local = savings(options.discount, overhead, options.rate, per_interruption)
    on_aws = savings(options.discount, overhead, options.rate, per_interruption + options.aws_replacement_seconds)
    print(json.dumps({
        "benchmark": "p6_savings",
        "spot_discount": options.discount,
        "interruptions_per_hour": options.rate,
        "measured_run": {k: report[k] for k in ("interruptions", "steps", "completed_steps_lost", "wall_seconds",
                                                "instance_seconds", "on_demand_equivalent_seconds", "savings")},
        "checkpoint_overhead": overhead,
        "seconds_lost_per_interruption": round(per_interruption, 2),
        "savings": round(local, 4),
        "savings_with_aws_replacement_time": round(on_aws, 4),
        "target_met": min(local, on_aws) >= 0.65,
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
