"""Hostile inputs: how clearly careless and hostile input is refused, as a user would meet it.

Four areas, each case run the way a user runs it:
  jobs      a job file (wrong types, bad values, broken files) through the real synth, `python app.py`
            with CDK_CONTEXT_JSON, as tests/unit/test_job_spec.py does
  console   a value typed into the CloudFormation console for jobs/example.toml and jobs/cifar.toml,
            judged by the synthesized template's own AllowedPattern/AllowedValues/MaxLength/Min/MaxValue
            and its Rules (the evaluator of tests/unit/test_console_rules.py)
  agent     one bad line in the agent's environment file, `python -m spot_trainer agent --env-file F`,
            with every AWS endpoint on a closed port (the agent's attempt to record FAILED fails fast)
  cli       bad flags of `python -m spot_trainer {status,train,agent}` and `python -m localcloud demo`;
            demo cases run every check the real demo makes, the job's `cdk synth` included, and a case
            that passes them all ends with exit 97 ("a real demo would start") instead of starting moto

Outcomes per case:
  clear      refused (non-zero exit) with one line that names the field, setting or flag expected
             (jobs: exit 2 and one "spot-trainer: " line; agent: exit 2 and a first line naming the
             setting; console: refused with a ConstraintDescription or an AssertDescription; cli: one
             line besides argparse's usage block)
  at_start   console: the template takes it, and the agent's own checks refuse it when the first instance
             starts (the job ends FAILED with that line and the group goes to zero)
  intended   accepted on purpose (INTENDED in hostile/judging.py says why), or accepted with a warning
             line naming the input
  unclear    refused, but not in one line naming what is wrong (console: refused with no description)
  traceback  a Python traceback reached the user
  accepted   the input went through (synth succeeded, the console takes it, the agent started, the
             command ran or a demo would start)
  hangs      no answer within the time limit (the process group is killed)

Each not-clear case is listed with its first relevant output line (for a traceback, its last line).
Everything is written under one temporary directory; nothing listens, nothing stays running.
Runs offline in about four minutes on two cores.

    .venv/bin/python benchmarks/hostile_inputs.py [--workers CORES] [--areas jobs console agent cli]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hostile.agent_env import agent_probe, env_cases
from hostile.cli_flags import cli_cases, cli_probe
from hostile.console_values import console_verdicts
from hostile.job_files import job_cases, job_probe
from hostile.judging import OUTCOMES, Probe, Verdict, verdict_of

from stacks.help_text import first_paragraph

# ---- the sweep -----------------------------------------------------------------------------------------


def probes(root: Path, areas: Sequence[str]) -> list[Probe]:
    found: list[Probe] = []
    if "jobs" in areas:
        found += [job_probe(i, case, root) for i, case in enumerate(job_cases())]
    if "agent" in areas:
        found += [agent_probe(i, case, root) for i, case in enumerate(env_cases())]
    if "cli" in areas:
        found += [cli_probe(i, case, root) for i, case in enumerate(cli_cases())]
    return found


def counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    tally = Counter(v.outcome for v in verdicts)
    return {"tried": len(verdicts), **{outcome: tally[outcome] for outcome in OUTCOMES}}


def summary(verdicts: Sequence[Verdict], seconds: float) -> dict[str, Any]:
    areas = sorted({v.area for v in verdicts}, key=["jobs", "console", "agent", "cli"].index)
    return {
        **counts(verdicts),
        "seconds": round(seconds, 1),
        "by_area": {area: counts([v for v in verdicts if v.area == area]) for area in areas},
        "not_clear": [{"area": v.area, "case": v.case, "outcome": v.outcome, "output": v.output}
                      for v in verdicts if v.outcome != "clear"],
    }


def sweep(areas: Sequence[str], workers: int) -> list[Verdict]:
    """CPU-bound commands one per core (more only thrash), the rest (mostly waiting on a closed port or
    a retry) eight at a time; the console is judged in this thread meanwhile."""
    with tempfile.TemporaryDirectory(prefix="hostile-inputs-") as directory:
        root = Path(directory)
        commands = probes(root, areas)
        with ThreadPoolExecutor(max_workers=workers) as heavy, ThreadPoolExecutor(max_workers=8) as light:
            running = [(heavy if probe.heavy else light).submit(verdict_of, probe) for probe in commands]
            console = console_verdicts(root) if "console" in areas else []
            ran = [future.result() for future in running]
    by_area: dict[str, list[Verdict]] = {"jobs": [], "console": console, "agent": [], "cli": []}
    for verdict in ran:
        by_area[verdict.area].append(verdict)
    return [v for area in ("jobs", "console", "agent", "cli") for v in by_area[area]]


def main() -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="CPU-bound commands (synths, the trainer) run at once (default: one per core)")
    parser.add_argument("--areas", nargs="+", default=["jobs", "console", "agent", "cli"],
                        choices=["jobs", "console", "agent", "cli"])
    options = parser.parse_args()
    started = time.monotonic()
    verdicts = sweep(options.areas, options.workers)
    print(json.dumps(summary(verdicts, time.monotonic() - started), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
