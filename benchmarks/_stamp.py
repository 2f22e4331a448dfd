"""Runs one benchmark and prints its JSON figures stamped with the machine, the date and the commit.

    python benchmarks/_stamp.py benchmarks/p1_checkpoint_stall.py [ARGS...]

A figure without the machine and commit it was measured on cannot be compared with the next one. The
benchmark's stderr passes through; its stdout is read as one or more JSON values (lines that are not
JSON go to stderr). Exits with the benchmark's status, or 1 when it printed no JSON at all.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def json_values(text: str) -> tuple[list[Any], list[str]]:
    """The JSON values in `text` (pretty-printed ones too), and the lines that are not JSON."""
    decoder, values, other, at = json.JSONDecoder(), [], [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        try:
            value, at = decoder.raw_decode(text, at)
            values.append(value)
        except json.JSONDecodeError:
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            other.append(text[at:end])
            at = end
    return values, other


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine() -> dict[str, Any]:
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "memory_gib": memory_gib(),
            "system": platform.platform(), "python": platform.python_version()}


def commit() -> str:
    """HEAD's hash, with `-dirty` when the tree has changes the figure may owe something to."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30).stdout.strip()
    head = git("rev-parse", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python benchmarks/_stamp.py BENCHMARK.py [ARGS...]", file=sys.stderr)
        return 2
    script = Path(argv[0])
    started = datetime.datetime.now(datetime.UTC)
    run = subprocess.run([sys.executable, str(script), *argv[1:]], stdout=subprocess.PIPE, text=True)
    values, other = json_values(run.stdout)
    for line in other:
        print(line, file=sys.stderr)
    if run.returncode != 0:
        print(f"{script}: exited {run.returncode}; its figures are not stamped", file=sys.stderr)
        return run.returncode
    if not values:
        print(f"{script}: printed no JSON figures", file=sys.stderr)
        return 1
    print(json.dumps({"benchmark": script.stem, "date": started.isoformat(timespec="seconds"),
                      "commit": commit(), "machine": machine(),
                      "figures": values[0] if len(values) == 1 else values}, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
