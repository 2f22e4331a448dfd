"""`make bench` stamps each benchmark's figures with the machine, the date and the commit they came from."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAMP = ROOT / "benchmarks" / "_stamp.py"


def stamp(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(STAMP), str(script)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_every_figure_comes_back_stamped_with_machine_date_and_commit(tmp_path: Path) -> None:
    script = tmp_path / "p0_example.py"
    script.write_text("import json\nprint('warming up')\nprint(json.dumps({'seconds': 1.5}, indent=2))\n"
                      "print(json.dumps({'seconds': 2.5}))\n")
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    result = stamp(script)
    assert result.returncode == 0, result.stderr
    stamped = json.loads(result.stdout)
    assert stamped["benchmark"] == "p0_example"
    assert stamped["figures"] == [{"seconds": 1.5}, {"seconds": 2.5}]
    assert before <= datetime.datetime.fromisoformat(stamped["date"]) <= datetime.datetime.now(datetime.UTC)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert stamped["commit"].removesuffix("-dirty") == head
    assert stamped["machine"]["cores"] == os.cpu_count() and stamped["machine"]["cpu"]
    assert "warming up" in result.stderr  # what is not a figure is not lost either


def test_a_failed_or_silent_benchmark_is_not_stamped(tmp_path: Path) -> None:
    failing = tmp_path / "failing.py"
    failing.write_text("import json, sys\nprint(json.dumps({'seconds': 1}))\nsys.exit(3)\n")
    result = stamp(failing)
    assert (result.returncode, result.stdout) == (3, "")
    assert "failing.py: exited 3" in result.stderr
    silent = tmp_path / "silent.py"
    silent.write_text("print('no figures here')\n")
    result = stamp(silent)
    assert (result.returncode, result.stdout) == (1, "")
    assert "silent.py: printed no JSON figures" in result.stderr
